//! Marked runs: every run of a test carries a marker of its own in its environment, by
//! which the test finds, from outside and independently of the executor, whatever of the
//! run is still alive, and kills it by pid.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use toolsmith_executor::Command;

/// The variable that carries the marker.
pub(crate) const MARKER_VAR: &str = "HOSTILE_TEST_ID";

static NEXT_MARKER: AtomicU64 = AtomicU64::new(0);

/// `program args` in `cwd` with a plain `PATH` and a fresh marker in its environment, by
/// which the survivors check finds whatever the run left; the marker comes back too.
pub(crate) fn marked_command(
    program: &Path,
    args: &[impl AsRef<OsStr>],
    cwd: &Path,
) -> (Command, String) {
    let marker = format!(
        "{}-{}",
        std::process::id(),
        NEXT_MARKER.fetch_add(1, Ordering::Relaxed)
    );
    let mut command = Command::new(program, cwd).unwrap();
    for arg in args {
        command.arg(arg.as_ref());
    }
    command.env(
        OsStr::new("PATH"),
        OsStr::new("/usr/local/bin:/usr/bin:/bin"),
    );
    command.env(OsStr::new(MARKER_VAR), OsStr::new(&marker));
    (command, marker)
}

/// Kills (by pid) every live process whose initial environment holds
/// `marker`, returning how many there were.
pub(crate) fn kill_marked(marker: &str) -> usize {
    let mut found = 0;
    for _ in 0..3 {
        let pids: Vec<i32> = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .filter(|pid| {
                fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                    environ
                        .split(|&byte| byte == 0)
                        .any(|entry| entry == marker.as_bytes())
                })
            })
            .collect();
        if pids.is_empty() {
            break;
        }
        found = found.max(pids.len());
        for pid in pids {
            // SAFETY: test hygiene; the pid was just seen carrying our marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    found
}
