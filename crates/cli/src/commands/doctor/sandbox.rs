//! The checks of the machine: the kernel features the executor probed, the sandbox mechanisms they allow, toolsmith's own privileges and memory, and how its secrets are protected.

use toolsmith_executor::{DISABLE_FEATURES_VAR, Executor, Features, Probe};

use crate::commands::doctor::{Check, Status};
use crate::settings::GlobalSettings;

/// The executor's kernel probes: what the containment backend can rely on.
/// A missing feature has a fallback, so it is a warning with the fix, never a problem.
pub(super) fn kernel_checks(executor: &Executor) -> Vec<Check> {
    executor
        .features()
        .checks()
        .into_iter()
        .map(|(name, probe)| Check {
            name: name.to_owned(),
            status: if probe.available {
                Status::Ok
            } else {
                Status::Warn
            },
            detail: probe.detail.clone(),
            fix: (!probe.available).then(|| feature_fix(name).to_owned()),
        })
        .collect()
}

/// What to do when a kernel feature is missing.
pub(super) fn feature_fix(name: &str) -> &'static str {
    match name {
        "cgroup.kill" | "memory controller" | "pids controller" | "cpu accounting" => {
            "run toolsmith in a cgroup v2 subtree it may write to (e.g. `systemd-run --user --scope -p Delegate=yes toolsmith ...`) or as root; without it, memory and process limits fall back to rlimits and trees are found by other means"
        }
        "pid namespace" => {
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) or run as root"
        }
        "subreaper" => "needs Linux 3.4 or later (prctl PR_SET_CHILD_SUBREAPER)",
        "pidfd" => {
            "needs Linux 5.3 or later; without it, signals go through cgroup.kill or process groups only"
        }
        _ => "see docs/executor.md for what each backend needs",
    }
}

/// One sandbox mechanism and what the kernel says about it.
pub(super) struct Support<'a> {
    pub(super) mechanism: &'static str,
    pub(super) purpose: &'static str,
    pub(super) probe: &'a Probe,
    pub(super) fix: &'static str,
}

impl Support<'_> {
    /// How to get the mechanism, when it is missing and not disabled on purpose.
    pub(super) fn fix(&self) -> Option<String> {
        if self.probe.available {
            return None;
        }
        if self.probe.detail.contains(DISABLE_FEATURES_VAR) {
            return Some(format!("unset {DISABLE_FEATURES_VAR}"));
        }
        Some(self.fix.to_owned())
    }
}

/// The sandbox mechanisms as report lines: a missing one is a warning, since
/// the calls that need it fail closed (or run without it where the operator
/// chose `-if-possible`).
pub(super) fn sandbox_checks(support: &[Support<'_>]) -> Vec<Check> {
    support
        .iter()
        .map(|support| Check {
            name: support.mechanism.to_owned(),
            status: if support.probe.available {
                Status::Ok
            } else {
                Status::Warn
            },
            detail: format!("{}: {}", support.purpose, support.probe.detail),
            fix: support.fix(),
        })
        .collect()
}

pub(super) fn sandbox_support(features: &Features) -> [Support<'_>; 8] {
    [
        Support {
            mechanism: "network namespace",
            purpose: "network = deny",
            probe: &features.network_namespace,
            fix: "run toolsmith as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0); or set network = \"deny-if-possible\"",
        },
        Support {
            mechanism: "landlock",
            purpose: "filesystem = project | read-only",
            probe: &features.landlock,
            fix: "use Linux 5.13 or later with `landlock` in the lsm= boot parameter; or set filesystem = \"project-if-possible\" / \"read-only-if-possible\"",
        },
        Support {
            mechanism: "private /proc",
            purpose: "tools see no other process, toolsmith's environment included",
            probe: &features.private_proc,
            fix: "run toolsmith as root, or allow unprivileged user namespaces; without it toolsmith's own environment is still blanked at start (see `secrets`)",
        },
        Support {
            mechanism: "mount namespace",
            purpose: "read-only /sys and cgroups, a minimal /dev, nodev mounts, and under project | read-only read-only mounts, protected paths and a capped tmpfs TMPDIR",
            probe: &features.private_mounts,
            fix: "use Linux 5.12 or later (mount_setattr) and run toolsmith as root or allow unprivileged user namespaces; as root, filesystem = project | read-only fail closed without it (set \"project-if-possible\" / \"read-only-if-possible\" to run with Landlock alone)",
        },
        Support {
            mechanism: "ipc and uts namespaces",
            purpose: "SysV objects and POSIX queues die with each call, the host's stay out of sight",
            probe: &features.ipc_namespace,
            fix: "run toolsmith as root, or allow unprivileged user namespaces",
        },
        Support {
            mechanism: "seccomp",
            purpose: "syscalls = filter (keyrings, bpf, mounts, namespaces, ptrace, modules, ... denied)",
            probe: &features.seccomp,
            fix: "use a kernel with CONFIG_SECCOMP_FILTER (Linux 3.17 or later) on x86_64 or aarch64, and no outer sandbox that forbids seccomp(2); or set syscalls = \"filter-if-possible\"",
        },
        Support {
            mechanism: "read-mask server",
            purpose: "a tool's attempts to read a masked path (~/.ssh, ~/.aws, toolsmith's state) are reported as `kind: \"read\"` denials naming the `read_reveal` to add; without it the masks hide the same, silently",
            probe: &features.read_watch,
            fix: "use Linux 6.15 or later with FUSE (/dev/fuse present: `modprobe fuse`), as root, and cgroup v2 (a run is told apart by its cgroup)",
        },
        Support {
            mechanism: "seccomp supervisor",
            purpose: "network = [\"unix:/path\"] grants, and no new repository (.git, HEAD) or absent protected path made at any depth of a writable root; without it Unix socket grants fail closed and an absent protected path's directory is sealed against every new entry",
            probe: &features.supervisor,
            fix: "use Linux 5.9 or later (seccomp user notifications with ADDFD, pidfd_getfd, openat2) and run toolsmith as root",
        },
    ]
}

/// Who tools run as, and with which capabilities.
pub(super) fn privileges_line(global: &GlobalSettings) -> String {
    let uid = toolsmith_executor::effective_uid();
    match (uid, global.sandbox.user) {
        (0, Some(user)) => format!(
            "tools run as {user} ([sandbox] user), no supplementary group, no capability, bounding set empty"
        ),
        (0, None) => "tools run as root (uid 0) with no capability and an empty bounding set; root-owned files stay writable to them: set [sandbox] user to run them as another uid".to_owned(),
        (uid, _) => format!(
            "tools run as uid {uid} (toolsmith's), with no capability, in their user namespace too"
        ),
    }
}

/// How toolsmith's own memory is kept from tools.
pub(super) fn memory_line() -> String {
    let dumpable = match crate::NOT_DUMPABLE.get() {
        Some(Ok(())) => "not dumpable (no tool can open /proc/<toolsmith>/mem)".to_owned(),
        Some(Err(error)) => format!("dumpable: {error}"),
        None => "dumpable (embedded use)".to_owned(),
    };
    match crate::ENVIRON_DROPPED.get() {
        Some(count) => format!(
            "{dumpable}; {count} variables no tool receives were dropped from its environment"
        ),
        None => dumpable,
    }
}

/// Which protection keeps toolsmith's environment from tools.
pub(super) struct Secrets {
    pub(super) protection: &'static str,
    pub(super) detail: String,
}

pub(super) fn secrets_protection(features: &Features) -> Secrets {
    let sealed = crate::ENVIRON_SEALED.get();
    let seal_detail = match sealed {
        Some(Ok(())) => "toolsmith's initial environment was blanked at start".to_owned(),
        Some(Err(error)) => {
            format!("toolsmith's initial environment could not be blanked: {error}")
        }
        None => "toolsmith's initial environment was not blanked (embedded use)".to_owned(),
    };
    match (
        features.private_proc.available,
        matches!(sealed, Some(Ok(()))),
    ) {
        (true, _) => Secrets {
            protection: "private-proc",
            detail: format!("every call has its own PID namespace and /proc; also {seal_detail}"),
        },
        (false, true) => Secrets {
            protection: "blanked-environ",
            detail: format!(
                "tools see other processes, but {seal_detail}; other processes of the same user stay readable"
            ),
        },
        (false, false) => Secrets {
            protection: "none",
            detail: format!(
                "{seal_detail}; a tool can read /proc/<pid>/environ of toolsmith: keep secrets out of its environment"
            ),
        },
    }
}
