//! The leak oracle of the executor's hostile suite (issue 22, acceptance 2): what a run
//! leaves must be neither charged to the next run on the same executor, nor visible to
//! it, nor left on the host; and the host must be as it was (`tests/leaks.rs`).
//!
//! [`Oracle::start`] captures the host before a test; [`Oracle::check_next_run`], called
//! after the test's hostile runs with the sandbox they had, makes two more runs on the same
//! executor under that sandbox: `leave-behind.py` leaves everything it can under names
//! carrying a tag of this test process (files in TMPDIR, `/dev/shm` and `/tmp`, 32 MiB of
//! tmpfs and 16 MiB of page cache, a SysV segment, path and abstract Unix sockets held by a
//! daemon that tries to outlive the run), then `run-view.sh` prints what the next run sees
//! of those places while the test reads that run's cgroup charge from outside. Each tagged
//! name the next run sees, or the host still has, is a failure, unless the run's applied
//! sandbox leaves that place shared with the host on purpose (no filesystem restriction:
//! `/tmp` and the TMPDIR are the host's; no mount namespace: `/dev/shm`; no IPC namespace:
//! SysV); those the oracle removes. [`Oracle::finish`] compares the host with its capture.
//!
//! Other test processes on the machine (another suite, another checkout) make objects of
//! their own meanwhile. Everything the oracle makes carries this process's pid (the tag, the
//! SysV key) and it fails only on what it can attribute to this process: a tagged name, a
//! cgroup directory `toolsmith-<pid>-*`, a run directory `toolsmith-run-<pid>-*`, anything
//! under its scratch directory. A host change it cannot attribute (a SysV object, a key or
//! a queue has no owner to tell by) is printed as a WARNING and left alone.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use toolsmith_executor::{AppliedSandbox, Executor, FilesystemAccess, Limits, Outcome, Sandbox};

use crate::leaks::HostState;
use crate::marked::{MARKER_VAR, kill_marked, marked_command};

/// The most a run that only lists a few directories may be charged, at its start and at
/// its peak: well under the 48 MiB `leave-behind.py` leaves charged.
const OWN_CHARGE_BOUND: u64 = 8 << 20;

static NEXT_TAG: AtomicU32 = AtomicU32::new(0);

/// The places the next run lists, as `run-view.sh` heads them.
const PLACES: [&str; 5] = ["tmpdir", "shm", "tmp", "unix", "sysv"];

/// The host before a test, and the scratch directory of its oracle runs.
pub(crate) struct Oracle {
    before: HostState,
    scratch: tempfile::TempDir,
}

/// What the next run saw of an earlier run's tagged names, by place, and what the host
/// still had of them: for a test that shows the oracle can see.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) by_next_run: Vec<&'static str>,
    pub(crate) on_host: Vec<String>,
}

impl Oracle {
    /// Captures the host (its TMPDIR: the oracle's scratch `tmp`, which the runs get).
    pub(crate) fn start() -> Oracle {
        let scratch = tempfile::tempdir().unwrap();
        fs::create_dir(scratch.path().join("tmp")).unwrap();
        fs::create_dir(scratch.path().join("work")).unwrap();
        let before = HostState::capture(&scratch.path().join("tmp"));
        Oracle { before, scratch }
    }

    fn tmpdir(&self) -> PathBuf {
        self.scratch.path().join("tmp")
    }

    /// Two runs on `executor` under `sandbox`: the first leaves what it can, the second
    /// must see none of it and start with no charge; then nothing of it may remain on the
    /// host. Returns what was seen where the sandbox shares a place with the host.
    #[track_caller]
    pub(crate) fn check_next_run(&self, executor: &Executor, sandbox: &Sandbox) -> Seen {
        let Some(python) = python() else {
            eprintln!("WARNING: no python3, the oracle between runs is SKIPPED");
            return Seen::default();
        };
        let serial = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("oracle-{pid}-{serial}");
        // A SysV key of this process: 0x4f, 16 bits of the pid, 8 of the serial.
        let key = i32::try_from(0x4f00_0000 | ((pid & 0xffff) << 8) | (serial & 0xff)).unwrap();
        let cwd = match &sandbox.filesystem {
            toolsmith_executor::Filesystem::Project { root, .. } => root.clone(),
            _ => self.scratch.path().join("work"),
        };
        let limits = Limits {
            timeout: Duration::from_secs(20),
            ..Limits::recommended()
        };

        let script = script("leave-behind.py");
        let args = [script.display().to_string(), tag.clone(), key.to_string()];
        let (mut command, marker) = marked_command(&python, &args, &cwd);
        command.env(OsStr::new("TMPDIR"), self.tmpdir().as_os_str());
        command.sandbox(sandbox.clone());
        let left = runtime().block_on(executor.run(&command, &limits));
        let survivors = kill_marked(&format!("{}={marker}", MARKER_VAR));
        let left = left.expect("the leaving run should start");
        assert!(left.success(), "the leaving run failed: {left:?}");
        assert_eq!(survivors, 0, "the leaving run's daemon outlived it");
        let printed = left.stdout.text_lossy();
        assert!(
            printed.contains("left: file in"),
            "the leaving run left nothing, the oracle cannot tell: {printed}"
        );
        let shared = Shared::of(&left.sandbox);

        let (view, charge, next) = self.next_run(executor, sandbox, &limits, &cwd);
        let mut seen = Seen::default();
        let key_text = key.to_string();
        for (place, text) in &view {
            // A SysV segment shows by its key (the first column), a name by the tag.
            let holds = match *place {
                "sysv" => text
                    .lines()
                    .any(|line| line.split_whitespace().next() == Some(key_text.as_str())),
                _ => text.contains(&tag),
            };
            if holds {
                assert!(
                    shared.place(place),
                    "the next run sees `{tag}` in {place}: {text}"
                );
                seen.by_next_run.push(place);
            }
        }
        match charge {
            Some(charge) => assert!(
                charge < OWN_CHARGE_BOUND,
                "the next run started with {charge} bytes charged (the earlier run left 48 MiB)"
            ),
            None => eprintln!(
                "WARNING: the next run has no memory cgroup here ({}), its charge is UNCHECKED",
                next.backend
            ),
        }
        if let Some(peak) = next.peak_memory {
            assert!(
                peak < OWN_CHARGE_BOUND,
                "the next run's peak is {peak} bytes: not its own"
            );
        }
        seen.on_host = self.on_host(&tag, key, &cwd, &shared);
        seen
    }

    /// Runs `run-view.sh` and reads its cgroup's charge while it waits; its view by place.
    fn next_run(
        &self,
        executor: &Executor,
        sandbox: &Sandbox,
        limits: &Limits,
        cwd: &Path,
    ) -> (BTreeMap<&'static str, String>, Option<u64>, Outcome) {
        let go = self.scratch.path().join("go");
        let _ = fs::remove_file(&go);
        let script = script("run-view.sh");
        let (mut command, marker) = marked_command(&script, &[go.as_os_str()], cwd);
        command.env(OsStr::new("TMPDIR"), self.tmpdir().as_os_str());
        command.sandbox(sandbox.clone());
        let marker = format!("{}={marker}", MARKER_VAR);
        let (outcome, charge) = std::thread::scope(|scope| {
            let running = scope.spawn(|| runtime().block_on(executor.run(&command, limits)));
            let charge = charge_of_marked(&marker);
            fs::write(&go, "").unwrap();
            (running.join().unwrap(), charge)
        });
        let _ = fs::remove_file(&go);
        assert_eq!(kill_marked(&marker), 0, "the viewing run survived");
        let outcome = outcome.expect("the viewing run should start");
        assert!(outcome.success(), "the viewing run failed: {outcome:?}");
        let printed = outcome.stdout.text_lossy();
        assert!(printed.contains("== end"), "the viewing run: {printed}");
        let mut view = BTreeMap::new();
        for section in printed.split("== ").skip(1) {
            let (place, text) = section.split_once('\n').unwrap_or((section, ""));
            if let Some(&place) = PLACES.iter().find(|&&known| known == place.trim()) {
                view.insert(place, text.to_owned());
            }
        }
        assert_eq!(view.len(), PLACES.len(), "the viewing run: {printed}");
        (view, charge, outcome)
    }

    /// What the host still has of `tag` and `key`, removing it: a failure where the run's
    /// sandbox keeps the place apart from the host.
    #[track_caller]
    fn on_host(&self, tag: &str, key: i32, cwd: &Path, shared: &Shared) -> Vec<String> {
        let mut found = Vec::new();
        let places: [(&Path, bool); 4] = [
            (&self.tmpdir(), shared.tmp),
            (Path::new("/tmp"), shared.tmp),
            (Path::new("/dev/shm"), shared.shm),
            // The working directory is the project (or the oracle's): a run that may write
            // there leaves its file, as it should.
            (cwd, true),
        ];
        for (dir, allowed) in places {
            for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                if !entry.file_name().to_string_lossy().starts_with(tag) {
                    continue;
                }
                let path = entry.path();
                let _ = fs::remove_file(&path);
                assert!(allowed, "{} is left on the host", path.display());
                found.push(path.display().to_string());
            }
        }
        let unix = fs::read_to_string("/proc/net/unix").unwrap_or_default();
        assert!(
            !unix.contains(tag),
            "a socket of the earlier run still listens on the host: {:?}",
            unix.lines()
                .filter(|line| line.contains(tag))
                .collect::<Vec<_>>()
        );
        let segments = fs::read_to_string("/proc/sysvipc/shm").unwrap_or_default();
        for line in segments.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.first() != Some(&key.to_string().as_str()) {
                continue;
            }
            if let Some(id) = fields.get(1).and_then(|id| id.parse::<i32>().ok()) {
                // SAFETY: removes the segment this oracle's run made, by its id.
                unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
            }
            assert!(
                shared.sysv,
                "the earlier run's SysV segment {key} is on the host"
            );
            found.push(format!("SysV segment {key}"));
        }
        found
    }

    /// The host against its capture, once the test's executors are dropped: what this
    /// process made must be gone, the runs' private TMPDIRs included.
    #[track_caller]
    pub(crate) fn finish(self) {
        let pid = std::process::id();
        let marks = [
            format!("toolsmith-{pid}-"),
            format!("toolsmith-run-{pid}-"),
            format!("oracle-{pid}-"),
            self.scratch.path().display().to_string(),
        ];
        // A run's private TMPDIR goes when its init is reaped, just after the run returns; a
        // sandbox prepared for a next run has one too, until the executor is dropped.
        let own_runs = format!("toolsmith-run-{}-", std::process::id());
        // The TMPDIRs live in the uid's runs' directory (`toolsmith-runs-<euid>`), shared with
        // other test processes.
        let own_bases = "toolsmith-runs-";
        let run_dirs = || -> Vec<String> {
            let names = |dir: &std::path::Path| -> Vec<(std::path::PathBuf, String)> {
                fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|entry| {
                        (
                            entry.path(),
                            entry.file_name().to_string_lossy().into_owned(),
                        )
                    })
                    .collect()
            };
            let top = names(&std::env::temp_dir());
            let inner = top
                .iter()
                .filter(|(_, name)| name.starts_with(own_bases))
                .flat_map(|(base, _)| names(base));
            top.iter()
                .cloned()
                .chain(inner)
                .map(|(_, name)| name)
                .filter(|name| name.starts_with(&own_runs))
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !run_dirs().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            run_dirs().is_empty(),
            "run directories left: {:?}",
            run_dirs()
        );
        let (ours, others) = self.before.leaks_of(pid, self.scratch.path(), &|leak| {
            marks.iter().any(|mark| leak.contains(mark.as_str()))
        });
        for other in &others {
            eprintln!(
                "WARNING: the host changed during this test, not under a name of this process (another test process?), left alone: {other}"
            );
        }
        assert!(ours.is_empty(), "left on the host: {ours:#?}");
    }
}

/// The places a run's applied sandbox leaves shared with the host (and so with the next
/// run), by design.
struct Shared {
    /// `/tmp` and the TMPDIR: no filesystem restriction, no private TMPDIR.
    tmp: bool,
    /// `/dev/shm`: no mount namespace of the run's own.
    shm: bool,
    /// SysV objects: no IPC namespace of the run's own.
    sysv: bool,
}

impl Shared {
    fn of(applied: &AppliedSandbox) -> Shared {
        Shared {
            tmp: applied.filesystem == FilesystemAccess::Full,
            shm: !applied.private_mounts,
            sysv: !applied.private_ipc,
        }
    }

    fn place(&self, place: &str) -> bool {
        match place {
            "tmpdir" | "tmp" => self.tmp,
            "shm" => self.shm,
            "sysv" => self.sysv,
            // Every socket of the earlier run died with it.
            _ => false,
        }
    }
}

/// The memory charge of the cgroup of the process carrying `marker` in its environment,
/// read from outside as soon as it appears (within 10 s); `None` without a memory cgroup.
fn charge_of_marked(marker: &str) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let pid = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                    environ
                        .split(|&byte| byte == 0)
                        .any(|entry| entry == marker.as_bytes())
                })
            });
        if let Some(pid) = pid {
            return memory_charge(pid);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the viewing run did not start within 10 s");
}

/// `memory.current` (v2) or `memory.usage_in_bytes` (v1) of `pid`'s cgroup.
fn memory_charge(pid: u32) -> Option<u64> {
    let memberships = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|field| *field == "-") else {
            continue;
        };
        let (Some(point), Some(fstype)) = (fields.get(4), fields.get(dash + 1)) else {
            continue;
        };
        let options = fields.get(dash + 3).copied().unwrap_or("");
        let (path, file) = match *fstype {
            "cgroup2" => (
                memberships
                    .lines()
                    .find_map(|entry| entry.strip_prefix("0::")),
                "memory.current",
            ),
            "cgroup" if options.split(',').any(|option| option == "memory") => (
                memberships.lines().find_map(|entry| {
                    let mut parts = entry.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers
                        .split(',')
                        .any(|controller| controller == "memory")
                        .then_some(path)
                }),
                "memory.usage_in_bytes",
            ),
            _ => continue,
        };
        let Some(path) = path else { continue };
        let value = Path::new(point)
            .join(path.trim_start_matches('/'))
            .join(file);
        if let Ok(text) = fs::read_to_string(value) {
            return text.trim().parse().ok();
        }
    }
    None
}

/// A script of the hostile corpus's `sandbox/` directory.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/hostile/sandbox")
        .join(name)
}

fn python() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|candidate| candidate.is_file())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
