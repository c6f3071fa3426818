//! The process oracle: which processes are alive, found in `/proc` by a marker in their
//! environment or by their ancestry, never by asking toolsmith.
//!
//! Every test that checks that no process of a call survives goes through it (with
//! [`crate::leaks`] for what else a call could leave), so "alive" means one thing everywhere:
//! a process that is not a zombie (a zombie has released its memory and runs nothing; its
//! parent reaps it).

use std::collections::BTreeMap;
use std::fmt::Display;
use std::fs;

/// What `/proc/<pid>/stat` says of a process that matters here.
struct Stat {
    /// The state letter (`R`, `S`, `D`, `T`, `Z`, ...).
    state: char,
    parent: u32,
}

/// The state and parent of `pid`; `None` once it is gone.
fn stat(pid: impl Display) -> Option<Stat> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces and parentheses: fields follow the last `)`.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some(Stat { state, parent })
}

/// The pids in `/proc` now.
fn pids() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
}

/// Whether `pid` is a live process (a zombie is not).
pub(crate) fn alive(pid: impl Display) -> bool {
    stat(pid).is_some_and(|stat| stat.state != 'Z')
}

/// The parent of `pid`, while it lives.
pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    stat(pid).map(|stat| stat.parent)
}

/// Live processes whose initial environment holds the entry `entry` (`NAME=value`, whole).
/// A tool's processes carry the marker its test put in its environment, wherever they moved
/// (a `setsid` daemon, a process re-parented to init).
pub(crate) fn marked(entry: &str) -> Vec<u32> {
    pids()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|&byte| byte == 0)
                    .any(|found| found == entry.as_bytes())
            })
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// Waits up to 5 s for every process carrying `entry` to be gone, then kills (by pid) any
/// that survived, so a failing test leaves nothing behind. Returns the survivors and how
/// long the wait took.
pub(crate) fn gone_or_killed(entry: &str) -> (Vec<u32>, std::time::Duration) {
    let started = std::time::Instant::now();
    let survivors = loop {
        let survivors = marked(entry);
        if survivors.is_empty() || started.elapsed() > std::time::Duration::from_secs(5) {
            break survivors;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let took = started.elapsed();
    for pid in &survivors {
        // SAFETY: these pids carry the caller's marker.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    (survivors, took)
}

/// Live processes whose ancestry includes `pid`, those in `except` left out.
pub(crate) fn descendants(pid: u32, except: &[u32]) -> Vec<u32> {
    let parents: BTreeMap<u32, u32> = pids()
        .filter_map(|child| {
            let stat = stat(child)?;
            (stat.state != 'Z').then_some((child, stat.parent))
        })
        .collect();
    parents
        .keys()
        .copied()
        .filter(|candidate| !except.contains(candidate))
        .filter(|&candidate| {
            let mut current = candidate;
            for _ in 0..64 {
                match parents.get(&current) {
                    Some(&parent) if parent == pid => return true,
                    Some(&parent) if parent > 1 => current = parent,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

#[test]
fn the_oracle_finds_a_marked_child_and_its_ancestry_and_no_longer_once_it_is_reaped() {
    let entry = format!("PROCESSES_ORACLE_TEST={}", std::process::id());
    let (name, value) = entry.split_once('=').unwrap();
    #[expect(
        clippy::disallowed_methods,
        reason = "the test's own child, waited below"
    )]
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .env(name, value)
        .spawn()
        .unwrap();
    let pid = child.id();
    // The parent of a vfork-style spawn resumes once the child has its new memory, a moment
    // before the kernel has written its environment there: poll (a bound on liveness only).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut found = marked(&entry);
    while found.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
        found = marked(&entry);
    }
    let partial = marked(&entry[..entry.len() - 1]);
    let own = std::process::id();
    let family = descendants(own, &[]);
    let family_but_it = descendants(own, &[pid]);
    let parent = parent_of(pid);
    let was_alive = alive(pid);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(found, [pid]);
    assert_eq!(partial, [] as [u32; 0], "an entry matches whole");
    assert!(family.contains(&pid), "{family:?}");
    assert!(!family_but_it.contains(&pid));
    assert_eq!(parent, Some(own));
    assert!(was_alive);
    assert!(!alive(pid));
    assert_eq!(marked(&entry), [] as [u32; 0]);
}
