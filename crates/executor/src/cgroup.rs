//! Cgroup leaves per run: tracking and killing the whole tree (v2
//! `cgroup.kill`), and limiting and measuring its memory, processes and CPU
//! (v2 controllers where delegated, else v1 hierarchies, as on hybrid hosts).
//!
//! The executor creates one directory per [`Executor`](crate::Executor),
//! `toolsmith-<pid>-<n>`, below the cgroup it runs in (never elsewhere), in
//! each hierarchy it uses, and holds a lease on each (`lease.rs`) so that no
//! other toolsmith, in whatever PID namespace, takes it for a dead one's.
//! Runs get leaves `run-<n>` inside it.
//!
//! Every run gets a leaf no run used before: a used leaf keeps what its run
//! left charged (a file on a tmpfs, page cache, kernel objects) and its
//! high-water marks, which would count against the next run's limit and
//! show in its figures. Creating a memory cgroup costs more than the whole
//! rest of a spawn (about 1.1 ms here, v1), so a keeper thread removes each
//! used leaf and makes a fresh one ahead of the next run, off the calls'
//! latency.
//!
//! When the executor's directories vanish under it (removed by hand, or by
//! an older toolsmith's sweep), the next run makes them again.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::lease::{self, make_executor_dir, remove_dir_retrying, remove_stale_dirs, restore_dir};
use crate::{Error, Limits, Probe};

/// Fresh leaves the keeper holds ready for the next runs.
const FRESH_LEAVES: usize = 2;

/// Where a controller lives for this executor.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placement {
    /// In the v2 leaf itself.
    V2,
    /// In a leaf of its own under this v1 directory (the executor's directory
    /// in that hierarchy).
    V1(PathBuf),
}

/// The cgroup directories of one executor, its fresh leaves, and the keeper
/// thread that retires used leaves and makes fresh ones.
#[derive(Debug)]
pub(crate) struct Cgroups {
    dirs: Arc<Dirs>,
    keeper: Option<(mpsc::Sender<Leaf>, std::thread::JoinHandle<()>)>,
}

/// The executor's directories, shared with the keeper thread.
#[derive(Debug)]
struct Dirs {
    /// The executor's v2 directory; leaves below it have `cgroup.kill`.
    v2_dir: PathBuf,
    memory: Option<Placement>,
    pids: Option<Placement>,
    cpu: Option<Placement>,
    /// The leases on the executor's directories (see `lease.rs`).
    leases: Mutex<Vec<(PathBuf, OwnedFd)>>,
    /// Leaves no run has used yet.
    fresh: Mutex<Vec<Leaf>>,
    next_leaf: AtomicU64,
}

/// One leaf directory with its `cgroup.procs` open for the child to join,
/// and the files every run reads or writes kept open: a path lookup in the
/// cgroup filesystem costs more than the read, and a run makes a dozen.
#[derive(Debug)]
struct LeafDir {
    path: PathBuf,
    procs: OwnedFd,
    kept: Vec<(&'static str, fs::File)>,
}

/// How a kept cgroup file is used.
#[derive(Debug, Clone, Copy)]
enum Access {
    Read,
    Write,
}

/// The cgroup leaves of one run.
#[derive(Debug)]
pub(crate) struct Leaf {
    v2: LeafDir,
    memory_v1: Option<LeafDir>,
    pids_v1: Option<LeafDir>,
    cpu_v1: Option<LeafDir>,
}

/// What the probe of the cgroup hierarchies found, for `doctor`.
#[derive(Debug, Clone)]
pub(crate) struct CgroupProbes {
    pub(crate) kill: Probe,
    pub(crate) memory: Probe,
    pub(crate) pids: Probe,
    pub(crate) cpu: Probe,
}

impl Cgroups {
    /// Finds the hierarchies, creates the executor's directories and reports
    /// what works. Returns `None` (with the reasons in the probes) when no v2
    /// hierarchy with `cgroup.kill` is usable below our own cgroup.
    pub(crate) fn create() -> (Option<Cgroups>, CgroupProbes) {
        let unavailable = |detail: &str| Probe {
            available: false,
            detail: detail.to_owned(),
        };
        let mut probes = CgroupProbes {
            kill: unavailable("no cgroup v2 hierarchy mounted"),
            memory: unavailable(
                "no memory controller available below our cgroup; RLIMIT_DATA per process instead",
            ),
            pids: unavailable(
                "no pids controller available below our cgroup; RLIMIT_NPROC (not binding for root) instead",
            ),
            cpu: unavailable(
                "no cpu accounting below our cgroup; RLIMIT_CPU per process and rusage instead",
            ),
        };
        let mounts = Mounts::read();
        let memberships = Memberships::read();
        let Some(v2_base) = mounts
            .v2
            .as_ref()
            .zip(memberships.v2.as_ref())
            .map(|(mount, path)| join_cgroup_path(mount, path))
        else {
            return (None, probes);
        };
        remove_stale_dirs(&v2_base);
        let (v2_dir, v2_lease) = match make_executor_dir(&v2_base) {
            Ok(made) => made,
            Err(error) => {
                probes.kill.detail = format!(
                    "cannot create a cgroup below {}: {error}",
                    v2_base.display()
                );
                return (None, probes);
            }
        };
        let dir_name = v2_dir
            .file_name()
            .map(ToOwned::to_owned)
            .unwrap_or_default();
        if !v2_dir.join("cgroup.kill").exists() {
            let _ = fs::remove_dir(&v2_dir);
            probes.kill.detail =
                "the kernel has no cgroup.kill (Linux 5.14 or later needed)".to_owned();
            return (None, probes);
        }
        probes.kill = Probe {
            available: true,
            detail: format!("cgroup v2 leaves under {}", v2_dir.display()),
        };
        let mut leases = vec![(v2_dir.clone(), v2_lease)];
        let mut place = |v2_name: &str, v1_name: &str, probe: &mut Probe| -> Option<Placement> {
            if enable_v2(&v2_dir, v2_name) {
                probe.available = true;
                probe.detail = format!("cgroup v2 `{v2_name}` controller");
                return Some(Placement::V2);
            }
            let mount = mounts
                .v1
                .iter()
                .find(|(_, controllers)| controllers.iter().any(|name| name == v1_name))?;
            let path = memberships
                .v1
                .iter()
                .find(|(controllers, _)| controllers.iter().any(|name| name == v1_name))?;
            let base = join_cgroup_path(&mount.0, &path.1);
            remove_stale_dirs(&base);
            let dir = base.join(&dir_name);
            match fs::create_dir(&dir).and_then(|()| lease::take(&dir)) {
                Ok(lease) => {
                    leases.push((dir.clone(), lease));
                    probe.available = true;
                    probe.detail = format!("cgroup v1 `{v1_name}` leaves under {}", dir.display());
                    Some(Placement::V1(dir))
                }
                Err(error) => {
                    let _ = fs::remove_dir(&dir);
                    probe.detail = format!(
                        "cannot create a v1 `{v1_name}` cgroup below {}: {error}",
                        base.display()
                    );
                    None
                }
            }
        };
        let memory = place("memory", "memory", &mut probes.memory);
        let pids = place("pids", "pids", &mut probes.pids);
        let cpu = place("cpu", "cpuacct", &mut probes.cpu);
        let dirs = Arc::new(Dirs {
            v2_dir,
            memory,
            pids,
            cpu,
            leases: Mutex::new(leases),
            fresh: Mutex::new(Vec::new()),
            next_leaf: AtomicU64::new(0),
        });
        let keeper = Dirs::start_keeper(&dirs);
        (Some(Cgroups { dirs, keeper }), probes)
    }

    /// True when memory is limited by a cgroup (so no RLIMIT_DATA is needed).
    pub(crate) fn limits_memory(&self) -> bool {
        self.dirs.memory.is_some()
    }

    /// True when the process count is capped by a cgroup.
    pub(crate) fn limits_pids(&self) -> bool {
        self.dirs.pids.is_some()
    }

    /// Takes a fresh leaf, or creates one, and applies `limits`. A fresh leaf
    /// whose directories vanished is dropped, and the executor's directories
    /// are made again when they are gone.
    pub(crate) fn acquire(&self, limits: &Limits) -> Result<Leaf, Error> {
        let dirs = &self.dirs;
        let taken = dirs.lock_fresh().pop();
        let leaf = match taken {
            Some(leaf) if leaf.alive() => leaf,
            vanished => {
                if vanished.is_some() {
                    dirs.lock_fresh().clear();
                }
                match dirs.create_leaf() {
                    Err(Error::Cgroup { source, .. })
                        if source.kind() == io::ErrorKind::NotFound =>
                    {
                        dirs.restore()?;
                        dirs.create_leaf()?
                    }
                    created => created?,
                }
            }
        };
        if let Err(error) = leaf.configure(dirs, limits) {
            leaf.remove();
            return Err(error);
        }
        Ok(leaf)
    }

    /// Hands a used leaf to the keeper thread, which removes it (killing
    /// anything left in it) and makes a fresh one for a later run.
    pub(crate) fn release(&self, leaf: Leaf) {
        match &self.keeper {
            Some((sender, _)) => {
                if let Err(mpsc::SendError(leaf)) = sender.send(leaf) {
                    leaf.remove();
                }
            }
            None => leaf.remove(),
        }
    }
}

/// Turns `controller` on for the leaves below `dir`, if delegated to it.
fn enable_v2(dir: &Path, controller: &str) -> bool {
    let delegated = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    delegated.split_whitespace().any(|name| name == controller)
        && fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}")).is_ok()
}

impl Dirs {
    fn lock_fresh(&self) -> std::sync::MutexGuard<'_, Vec<Leaf>> {
        self.fresh
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The keeper thread: removes each used leaf it is sent and tops the
    /// fresh leaves up. `None` when no thread can be started: used leaves
    /// are then removed on the spot, and each run creates its leaf.
    fn start_keeper(dirs: &Arc<Dirs>) -> Option<(mpsc::Sender<Leaf>, std::thread::JoinHandle<()>)> {
        let (sender, receiver) = mpsc::channel::<Leaf>();
        let shared = Arc::clone(dirs);
        let thread = std::thread::Builder::new()
            .name("toolsmith-leaves".to_owned())
            .spawn(move || {
                while let Ok(used) = receiver.recv() {
                    used.remove();
                    while shared.lock_fresh().len() < FRESH_LEAVES {
                        match shared.create_leaf() {
                            Ok(leaf) => shared.lock_fresh().push(leaf),
                            Err(error) => {
                                tracing::debug!(%error, "could not make a fresh cgroup leaf");
                                break;
                            }
                        }
                    }
                }
            })
            .ok()?;
        Some((sender, thread))
    }

    /// Every directory of the executor: the v2 one and its v1 ones.
    fn executor_dirs(&self) -> Vec<&Path> {
        let v1 = [&self.memory, &self.pids, &self.cpu]
            .into_iter()
            .filter_map(|placement| match placement {
                Some(Placement::V1(dir)) => Some(dir.as_path()),
                _ => None,
            });
        std::iter::once(self.v2_dir.as_path()).chain(v1).collect()
    }

    /// Makes the executor's directories that something removed again (the
    /// v2 one with its controllers turned on), with new leases.
    fn restore(&self) -> Result<(), Error> {
        let mut leases = self
            .leases
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for dir in self.executor_dirs() {
            if dir.exists() {
                continue;
            }
            let lease = restore_dir(dir).map_err(|source| Error::Cgroup {
                path: dir.to_path_buf(),
                source,
            })?;
            leases.retain(|(leased, _)| leased != dir);
            leases.push((dir.to_path_buf(), lease));
        }
        for (placement, controller) in [
            (&self.memory, "memory"),
            (&self.pids, "pids"),
            (&self.cpu, "cpu"),
        ] {
            if *placement == Some(Placement::V2) && !enable_v2(&self.v2_dir, controller) {
                return Err(Error::Cgroup {
                    path: self.v2_dir.join("cgroup.subtree_control"),
                    source: io::Error::other(format!(
                        "cannot turn on the {controller} controller again"
                    )),
                });
            }
        }
        tracing::warn!(path = %self.v2_dir.display(), "the executor's cgroup vanished; made it again");
        Ok(())
    }

    fn create_leaf(&self) -> Result<Leaf, Error> {
        let name = format!("run-{}", self.next_leaf.fetch_add(1, Ordering::Relaxed));
        let mut v2 = LeafDir::create(&self.v2_dir.join(&name))?;
        v2.keep("cgroup.events", Access::Read);
        v2.keep("cpu.stat", Access::Read);
        if self.memory == Some(Placement::V2) {
            v2.keep("memory.max", Access::Write);
            v2.keep("memory.swap.max", Access::Write);
            v2.keep("memory.events", Access::Read);
            v2.keep("memory.peak", Access::Read);
        }
        if self.pids == Some(Placement::V2) {
            v2.keep("pids.max", Access::Write);
        }
        let mut leaf = Leaf {
            v2,
            memory_v1: None,
            pids_v1: None,
            cpu_v1: None,
        };
        let v1_leaf = |placement: &Option<Placement>| -> Result<Option<LeafDir>, Error> {
            match placement {
                Some(Placement::V1(dir)) => LeafDir::create(&dir.join(&name)).map(Some),
                _ => Ok(None),
            }
        };
        let created = (|| -> Result<(), Error> {
            leaf.memory_v1 = v1_leaf(&self.memory)?;
            if let Some(memory) = &mut leaf.memory_v1 {
                memory.keep("memory.limit_in_bytes", Access::Write);
                memory.keep("memory.max_usage_in_bytes", Access::Read);
                memory.keep("memory.oom_control", Access::Read);
            }
            leaf.pids_v1 = v1_leaf(&self.pids)?;
            if let Some(pids) = &mut leaf.pids_v1 {
                pids.keep("pids.max", Access::Write);
            }
            leaf.cpu_v1 = v1_leaf(&self.cpu)?;
            if let Some(cpu) = &mut leaf.cpu_v1 {
                cpu.keep("cpuacct.usage", Access::Read);
            }
            Ok(())
        })();
        match created {
            Ok(()) => Ok(leaf),
            Err(error) => {
                leaf.remove();
                Err(error)
            }
        }
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        // The keeper ends when its channel closes, after the leaves it was sent.
        if let Some((sender, thread)) = self.keeper.take() {
            drop(sender);
            let _ = thread.join();
        }
        for leaf in std::mem::take(&mut *self.dirs.lock_fresh()) {
            leaf.remove();
        }
        for dir in self.dirs.executor_dirs() {
            let _ = fs::remove_dir(dir);
        }
    }
}

impl LeafDir {
    fn create(path: &Path) -> Result<LeafDir, Error> {
        let cgroup_error = |source| Error::Cgroup {
            path: path.to_path_buf(),
            source,
        };
        match fs::create_dir(path) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(cgroup_error(error)),
        }
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(path.join("cgroup.procs"))
            .map_err(cgroup_error)?;
        Ok(LeafDir {
            path: path.to_path_buf(),
            procs: procs.into(),
            kept: Vec::new(),
        })
    }

    /// Keeps `file` open for [`LeafDir::read`] and [`LeafDir::write`]. A file
    /// this kernel lacks (`memory.peak` before Linux 5.19) is left to them
    /// to find missing.
    fn keep(&mut self, file: &'static str, access: Access) {
        let opened = fs::OpenOptions::new()
            .read(matches!(access, Access::Read))
            .write(matches!(access, Access::Write))
            .open(self.path.join(file));
        if let Ok(opened) = opened {
            self.kept.push((file, opened));
        }
    }

    fn kept(&self, file: &str) -> Option<&fs::File> {
        self.kept
            .iter()
            .find_map(|(name, kept)| (*name == file).then_some(kept))
    }

    fn write(&self, file: &str, value: &str) -> Result<(), Error> {
        let path = || self.path.join(file);
        match self.kept(file) {
            // A cgroup file takes each write whole, wherever it is made. A
            // signal pending on this thread makes a v1 limit write fail with
            // EINTR before it does anything (`mem_cgroup_resize_max`): it is
            // made again, as `fs::write` does.
            Some(kept) => loop {
                match kept.write_at(value.as_bytes(), 0) {
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    written => break written.map(drop),
                }
            },
            None => fs::write(path(), value),
        }
        .map_err(|source| Error::Cgroup {
            path: path(),
            source,
        })
    }

    fn read(&self, file: &str) -> Option<String> {
        let Some(kept) = self.kept(file) else {
            return fs::read_to_string(self.path.join(file)).ok();
        };
        // Reading from offset 0 makes the kernel render the file afresh.
        let mut text = Vec::new();
        let mut chunk = [0_u8; 512];
        loop {
            let offset = u64::try_from(text.len()).ok()?;
            match kept.read_at(&mut chunk, offset) {
                Ok(0) => return String::from_utf8(text).ok(),
                Ok(read) => text.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

impl Leaf {
    /// The `cgroup.procs` descriptors the child writes itself into.
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        [
            Some(&self.v2),
            self.memory_v1.as_ref(),
            self.pids_v1.as_ref(),
            self.cpu_v1.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|dir| dir.procs.as_raw_fd())
        .collect()
    }

    /// The relative path of the v2 leaf as `/proc/<pid>/cgroup` shows it.
    pub(crate) fn v2_path(&self) -> &Path {
        &self.v2.path
    }

    fn configure(&self, cgroups: &Dirs, limits: &Limits) -> Result<(), Error> {
        match (&cgroups.memory, &self.memory_v1) {
            (Some(Placement::V2), _) => {
                let max = limits
                    .memory
                    .map_or("max".to_owned(), |bytes| bytes.to_string());
                self.v2.write("memory.max", &max)?;
                // Swap would let the tree exceed the limit silently.
                let _ = self.v2.write("memory.swap.max", "0");
            }
            (_, Some(memory)) => {
                let max = limits
                    .memory
                    .map_or("-1".to_owned(), |bytes| bytes.to_string());
                memory.write("memory.limit_in_bytes", &max)?;
            }
            _ => {}
        }
        let pids_max = limits
            .max_processes
            .map_or("max".to_owned(), |count| count.to_string());
        match (&cgroups.pids, &self.pids_v1) {
            (Some(Placement::V2), _) => self.v2.write("pids.max", &pids_max)?,
            (_, Some(pids)) => pids.write("pids.max", &pids_max)?,
            _ => {}
        }
        Ok(())
    }

    /// The pids of every process in the run, read from the v2 leaf.
    pub(crate) fn pids(&self) -> Vec<libc::pid_t> {
        self.v2
            .read("cgroup.procs")
            .map(|procs| {
                procs
                    .lines()
                    .filter_map(|line| line.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// True when no process is left in the run.
    pub(crate) fn is_empty(&self) -> bool {
        match self.v2.read("cgroup.events") {
            Some(events) => events.lines().any(|line| line.trim() == "populated 0"),
            None => self.pids().is_empty(),
        }
    }

    /// Kills every process of the run at once, new forks included.
    pub(crate) fn kill(&self) {
        if let Err(error) = self.v2.write("cgroup.kill", "1") {
            tracing::warn!(%error, "cgroup.kill failed");
        }
    }

    /// Polls until the leaf is empty or `budget` is spent; true when empty.
    pub(crate) async fn wait_empty(&self, budget: Duration) -> bool {
        let give_up = Instant::now() + budget;
        let mut pause = Duration::from_micros(200);
        loop {
            if self.is_empty() {
                return true;
            }
            if Instant::now() >= give_up {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// As [`Leaf::wait_empty`], blocking the thread; for `Drop`.
    pub(crate) fn wait_empty_blocking(&self, budget: Duration) -> bool {
        let give_up = Instant::now() + budget;
        let mut pause = Duration::from_micros(200);
        loop {
            if self.is_empty() {
                return true;
            }
            if Instant::now() >= give_up {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// CPU time used by the run so far (user + system, every process).
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        if let Some(cpu) = &self.cpu_v1 {
            let nanos: u64 = cpu.read("cpuacct.usage")?.trim().parse().ok()?;
            return Some(Duration::from_nanos(nanos));
        }
        let stat = self.v2.read("cpu.stat")?;
        let micros = stat
            .lines()
            .find_map(|line| line.strip_prefix("usage_usec "))?
            .trim()
            .parse()
            .ok()?;
        Some(Duration::from_micros(micros))
    }

    /// The run's peak memory in bytes.
    pub(crate) fn peak_memory(&self) -> Option<u64> {
        match &self.memory_v1 {
            Some(memory) => memory
                .read("memory.max_usage_in_bytes")?
                .trim()
                .parse()
                .ok(),
            None => self.v2.read("memory.peak")?.trim().parse().ok(),
        }
    }

    /// OOM kills in the run so far.
    pub(crate) fn oom_kills(&self) -> u64 {
        let (text, key) = match &self.memory_v1 {
            Some(memory) => (memory.read("memory.oom_control"), "oom_kill "),
            None => (self.v2.read("memory.events"), "oom_kill "),
        };
        text.and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix(key))
                .and_then(|count| count.trim().parse().ok())
        })
        .unwrap_or(0)
    }

    /// True while every directory of the leaf exists: reading a kept file
    /// of a removed cgroup fails (ENODEV), and a v1 directory is looked up.
    fn alive(&self) -> bool {
        self.v2.read("cgroup.events").is_some()
            && [
                self.memory_v1.as_ref(),
                self.pids_v1.as_ref(),
                self.cpu_v1.as_ref(),
            ]
            .into_iter()
            .flatten()
            .all(|dir| dir.read("cgroup.procs").is_some())
    }

    /// Removes the leaf's directories, killing anything left in them first.
    pub(crate) fn remove(self) {
        if !self.is_empty() {
            self.kill();
            self.wait_empty_blocking(Duration::from_millis(200));
        }
        for dir in [Some(self.v2), self.memory_v1, self.pids_v1, self.cpu_v1]
            .into_iter()
            .flatten()
        {
            drop((dir.procs, dir.kept));
            remove_dir_retrying(&dir.path);
        }
    }
}

fn join_cgroup_path(mount: &Path, cgroup: &str) -> PathBuf {
    mount.join(cgroup.trim_start_matches('/'))
}

/// The cgroup mounts of this mount namespace.
#[derive(Debug, Default)]
struct Mounts {
    v2: Option<PathBuf>,
    v1: Vec<(PathBuf, Vec<String>)>,
}

impl Mounts {
    fn read() -> Mounts {
        fs::read_to_string("/proc/self/mountinfo")
            .map(|text| Mounts::parse(&text))
            .unwrap_or_default()
    }

    /// Parses `/proc/self/mountinfo`: the mount point is the fifth field; the
    /// file system type and super options follow the ` - ` separator.
    fn parse(mountinfo: &str) -> Mounts {
        let mut mounts = Mounts::default();
        for line in mountinfo.lines() {
            let Some((before, after)) = line.split_once(" - ") else {
                continue;
            };
            let Some(mount_point) = before.split(' ').nth(4) else {
                continue;
            };
            let mut after = after.split(' ');
            let fs_type = after.next().unwrap_or_default();
            let super_options = after.nth(1).unwrap_or_default();
            let mount_point = PathBuf::from(mount_point.replace("\\040", " "));
            match fs_type {
                "cgroup2" if mounts.v2.is_none() => mounts.v2 = Some(mount_point),
                "cgroup" => {
                    let controllers = super_options.split(',').map(str::to_owned).collect();
                    mounts.v1.push((mount_point, controllers));
                }
                _ => {}
            }
        }
        mounts
    }
}

/// The cgroups this process belongs to.
#[derive(Debug, Default)]
struct Memberships {
    v2: Option<String>,
    v1: Vec<(Vec<String>, String)>,
}

impl Memberships {
    fn read() -> Memberships {
        fs::read_to_string("/proc/self/cgroup")
            .map(|text| Memberships::parse(&text))
            .unwrap_or_default()
    }

    /// Parses `/proc/self/cgroup` lines `id:controllers:path`.
    fn parse(text: &str) -> Memberships {
        let mut memberships = Memberships::default();
        for line in text.lines() {
            let mut fields = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if id == "0" && controllers.is_empty() {
                memberships.v2 = Some(path.to_owned());
            } else {
                let controllers = controllers.split(',').map(str::to_owned).collect();
                memberships.v1.push((controllers, path.to_owned()));
            }
        }
        memberships
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_hybrid_mountinfo() {
        let mountinfo = "\
35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
36 25 0:31 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
37 25 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
";
        let mounts = Mounts::parse(mountinfo);
        assert_eq!(mounts.v2, Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(mounts.v1.len(), 2);
        assert_eq!(mounts.v1[1].1, ["rw", "cpu", "cpuacct"]);
    }

    #[test]
    fn parses_memberships() {
        let memberships = Memberships::parse("4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n");
        assert_eq!(memberships.v2.as_deref(), Some("/"));
        assert_eq!(
            memberships.v1[0],
            (vec!["memory".to_owned()], "/process_api/abc".to_owned())
        );
        assert_eq!(memberships.v1[1].0, ["cpu", "cpuacct"]);
    }
}
