//! The leak oracle: what a call left on the host, checked from outside, never by asking
//! toolsmith.
//!
//! [`HostState::capture`] is taken before a call and [`HostState::leaks`] after it; every
//! hostile test (`hostile.rs`, `sandbox.rs`) goes through it. It compares:
//! - the host's mounts (`/proc/self/mountinfo` of the test process, i.e. the host's mount
//!   namespace);
//! - the cgroup directories below the test's own cgroup in every mounted hierarchy (v1 and v2),
//!   keeping only those of the call's toolsmith process (`toolsmith-<pid>-*`) or of nobody
//!   (a directory a tool made outside toolsmith's own), so concurrent tests do not count;
//! - SysV objects (`/proc/sysvipc/{shm,msg,sem}`) and POSIX message queues (the host IPC
//!   namespace's mqueue filesystem, mounted in a private mount namespace of a helper);
//! - kernel keys (`/proc/keys`, the keys root may view: its user and session keyrings);
//! - the TMPDIR given to toolsmith (must be as it was: empty);
//!
//! and then runs `toolsmith list` once more, whose stderr must be empty (no warning about a
//! clean-up that failed). What it finds it also removes, where the test owns it (a mount under
//! the test's root, a cgroup directory of the call, an object created during the call, an
//! immutable file in the test's TMPDIR), so a failing test leaves the machine as it was.
//!
//! Concurrent tests of this binary create cgroup directories of their own toolsmith processes,
//! which the filter above leaves out. A SysV object, key or queue has no owner to filter by, so
//! a call whose tool tries to leave one (the attacks) holds the [`Window`] exclusively: no other
//! oracle-checked call runs meanwhile, and each leak is reported by the test that caused it.
//! Ordinary calls share the window.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static WINDOW: RwLock<()> = RwLock::new(());

/// The time from a [`HostState::capture`] to its [`HostState::leaks`]: shared by ordinary
/// calls, exclusive for a call that tries to leave host objects behind.
pub(crate) enum Window {
    Shared(#[expect(dead_code, reason = "held, not read")] RwLockReadGuard<'static, ()>),
    Exclusive(#[expect(dead_code, reason = "held, not read")] RwLockWriteGuard<'static, ()>),
}

impl Window {
    pub(crate) fn open(exclusive: bool) -> Window {
        if exclusive {
            Window::Exclusive(WINDOW.write().unwrap_or_else(PoisonError::into_inner))
        } else {
            Window::Shared(WINDOW.read().unwrap_or_else(PoisonError::into_inner))
        }
    }
}

/// The host objects a call could leave behind, at one moment.
#[derive(Debug, Clone)]
pub(crate) struct HostState {
    mounts: BTreeSet<String>,
    cgroups: BTreeSet<PathBuf>,
    sysv: BTreeSet<(&'static str, i32, String)>,
    mqueues: BTreeSet<String>,
    keys: BTreeSet<(i32, String)>,
    tmp: BTreeSet<PathBuf>,
    tmpdir: PathBuf,
}

impl HostState {
    /// Everything, with `tmpdir` the TMPDIR toolsmith is given.
    pub(crate) fn capture(tmpdir: &Path) -> HostState {
        HostState {
            mounts: mounts(),
            cgroups: cgroup_dirs(),
            sysv: sysv(),
            mqueues: mqueues(tmpdir),
            keys: keys(),
            tmp: tree(tmpdir),
            tmpdir: tmpdir.to_path_buf(),
        }
    }

    /// What appeared since `self` (the state before a call made by toolsmith process
    /// `toolsmith_pid`), removing what the test owns. Empty when nothing leaked.
    pub(crate) fn leaks(&self, toolsmith_pid: u32, test_root: &Path) -> Vec<String> {
        self.leaks_of(toolsmith_pid, test_root, &|_| true).0
    }

    /// [`HostState::leaks`], for a test that shares the machine with other test processes:
    /// only what `ours` accepts (by its description) is a leak, and removed; the rest is
    /// returned apart and left alone.
    pub(crate) fn leaks_of(
        &self,
        toolsmith_pid: u32,
        test_root: &Path,
        ours: &dyn Fn(&str) -> bool,
    ) -> (Vec<String>, Vec<String>) {
        let after = HostState::capture(&self.tmpdir);
        let mut leaks = Vec::new();
        let mut others = Vec::new();
        let mut sort = |finding: String| {
            if ours(&finding) {
                leaks.push(finding);
                true
            } else {
                others.push(finding);
                false
            }
        };

        for line in after.mounts.difference(&self.mounts) {
            if !sort(format!("mount: {line}")) {
                continue;
            }
            if let Some(point) = line.split(' ').nth(4)
                && Path::new(point).starts_with(test_root)
            {
                // SAFETY: a plain syscall on a path below the test's own temp directory.
                let path = std::ffi::CString::new(point).unwrap();
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
        }

        let own = format!("toolsmith-{toolsmith_pid}-");
        let mut new_cgroups: Vec<&PathBuf> = after
            .cgroups
            .difference(&self.cgroups)
            .filter(|dir| {
                // Another toolsmith's directory (a concurrent test) is not this call's.
                !dir.components().any(|part| {
                    let part = part.as_os_str().to_string_lossy();
                    part.starts_with("toolsmith-") && !part.starts_with(&own)
                })
            })
            .collect();
        // Deepest first, so parents can go once their children are gone.
        new_cgroups.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
        for dir in new_cgroups {
            if !sort(format!("cgroup directory: {}", dir.display())) {
                continue;
            }
            // Processes still in it are the call's: a v2 leaf has cgroup.kill.
            let _ = fs::write(dir.join("cgroup.kill"), "1");
            std::thread::sleep(std::time::Duration::from_millis(20));
            let _ = fs::remove_dir(dir);
        }

        for (kind, id, line) in after.sysv.difference(&self.sysv) {
            if line.starts_with(&format!("key {}", test_segment_key())) {
                // The host segment a test made on purpose, for a tool to find.
                continue;
            }
            if !sort(format!("SysV {kind}: {line}")) {
                continue;
            }
            // SAFETY: removes a SysV object that appeared during the call.
            unsafe {
                match *kind {
                    "shm" => libc::shmctl(*id, libc::IPC_RMID, std::ptr::null_mut()),
                    "msg" => libc::msgctl(*id, libc::IPC_RMID, std::ptr::null_mut()),
                    _ => libc::semctl(*id, 0, libc::IPC_RMID),
                }
            };
        }

        for queue in after.mqueues.difference(&self.mqueues) {
            if !sort(format!("POSIX message queue: /{queue}")) {
                continue;
            }
            let name = std::ffi::CString::new(format!("/{queue}")).unwrap();
            // SAFETY: unlinks a queue that appeared during the call.
            unsafe { libc::mq_unlink(name.as_ptr()) };
        }

        for (id, line) in after.keys.difference(&self.keys) {
            if !sort(format!("key: {line}")) {
                continue;
            }
            // SAFETY: KEYCTL_INVALIDATE of a key that appeared during the call.
            unsafe { libc::syscall(libc::SYS_keyctl, 21, *id) };
        }

        let new_files: Vec<&PathBuf> = after
            .tmp
            .difference(&self.tmp)
            .filter(|path| sort(format!("temporary file: {}", path.display())))
            .collect();
        if !new_files.is_empty() {
            clear_immutable(&self.tmpdir);
            for path in new_files {
                let _ = fs::remove_dir_all(path).or_else(|_| fs::remove_file(path));
            }
        }
        (leaks, others)
    }
}

/// The key of the SysV segment a test of this process makes on the host side (the target of
/// a06): the oracle leaves it alone.
pub(crate) fn test_segment_key() -> i32 {
    i32::try_from(0x7000_0000_u32 | (std::process::id() & 0xff_ffff)).unwrap()
}

/// The host mount table, without the fields that change when an unrelated mount comes or
/// goes (none: a mountinfo line is stable while its mount exists).
fn mounts() -> BTreeSet<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every directory (to depth 6) below the test process's own cgroup, in every mounted
/// cgroup hierarchy.
pub(crate) fn cgroup_dirs() -> BTreeSet<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = BTreeSet::new();
    for line in fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
    {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|field| *field == "-") else {
            continue;
        };
        let (Some(point), Some(fstype)) = (fields.get(4), fields.get(dash + 1)) else {
            continue;
        };
        let options = fields.get(dash + 3).copied().unwrap_or("");
        let path = match *fstype {
            "cgroup2" => own
                .lines()
                .find_map(|entry| entry.strip_prefix("0::"))
                .unwrap_or("/"),
            "cgroup" => own
                .lines()
                .find_map(|entry| {
                    let mut parts = entry.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    let named = controllers.split(',').any(|controller| {
                        !controller.is_empty()
                            && options.split(',').any(|option| option == controller)
                    });
                    named.then_some(path)
                })
                .unwrap_or("/"),
            _ => continue,
        };
        let base = Path::new(point).join(path.trim_start_matches('/'));
        walk_dirs(&base, 6, &mut dirs);
    }
    dirs
}

fn walk_dirs(dir: &Path, depth: u32, into: &mut BTreeSet<PathBuf>) {
    if depth == 0 {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            let path = entry.path();
            walk_dirs(&path, depth - 1, into);
            into.insert(path);
        }
    }
}

/// SysV objects as (kind, id, the /proc line without its time and pid columns).
fn sysv() -> BTreeSet<(&'static str, i32, String)> {
    let mut objects = BTreeSet::new();
    for kind in ["shm", "msg", "sem"] {
        let text = fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(key), Some(id)) = (fields.first(), fields.get(1)) else {
                continue;
            };
            if let Ok(id) = id.parse() {
                objects.insert((kind, id, format!("key {key} id {id}")));
            }
        }
    }
    objects
}

/// The host IPC namespace's POSIX message queues: a helper in a private mount namespace
/// mounts its mqueue filesystem on a directory of the test and lists it. Empty (and no
/// helper) where the test cannot do that (not root).
fn mqueues(scratch: &Path) -> BTreeSet<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/unshare").exists() {
        return BTreeSet::new();
    }
    let point = scratch.with_extension("mqueue-oracle");
    let _ = fs::create_dir_all(&point);
    #[expect(
        clippy::disallowed_methods,
        reason = "the oracle looks at the host from a private mount namespace"
    )]
    let output = Command::new("/usr/bin/unshare")
        .args(["--mount", "--propagation", "private", "/bin/sh", "-c"])
        .arg("mount -t mqueue none \"$0\" && ls -1 \"$0\"")
        .arg(&point)
        .output();
    let _ = fs::remove_dir(&point);
    match output {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect(),
        other => panic!("the leak oracle could not list the host's message queues: {other:?}"),
    }
}

/// The keys this process may view, as (serial, line without the expiry and usage columns).
fn keys() -> BTreeSet<(i32, String)> {
    fs::read_to_string("/proc/keys")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let id = i32::from_str_radix(fields.first()?, 16).ok()?;
            let description = fields.get(8..)?.join(" ");
            let description = description.split(':').next().unwrap_or("").to_owned();
            Some((id, format!("{} {} {description}", fields[0], fields[7])))
        })
        .collect()
}

/// Every path below `dir`.
fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut paths = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(path.clone());
            }
            paths.insert(path);
        }
    }
    paths
}

/// `chattr -R -i -a` on `dir`, so that a file a tool made immutable can be removed.
pub(crate) fn clear_immutable(dir: &Path) {
    if Path::new("/usr/bin/chattr").exists() && dir.exists() {
        #[expect(
            clippy::disallowed_methods,
            reason = "undo an immutable flag a tool set on a test-owned file"
        )]
        let _ = Command::new("/usr/bin/chattr")
            .args(["-R", "-f", "-i", "-a"])
            .arg(dir)
            .output();
    }
}
