//! Probing what the kernel allows: cgroups, namespaces, pidfds, subreapers.

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
    /// `pidfd_open` and `pidfd_send_signal`.
    pub pidfd: Probe,
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
        ]
    }
}

/// Probes the kernel.
pub fn probe_features() -> Features {
    let unprobed = || Probe {
        available: false,
        detail: "not probed yet".to_owned(),
    };
    Features {
        cgroup_kill: unprobed(),
        memory_controller: unprobed(),
        pids_controller: unprobed(),
        cpu_accounting: unprobed(),
        pid_namespace: unprobed(),
        subreaper: unprobed(),
        pidfd: unprobed(),
    }
}
