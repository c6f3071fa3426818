//! Finding processes in `/proc`, for the backends without a cgroup: by
//! process group, or by a marker in the environment.

use std::fs;

/// The fields of `/proc/<pid>/stat` the sweeps need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcEntry {
    pub(crate) pid: libc::pid_t,
    pub(crate) state: u8,
    pub(crate) ppid: libc::pid_t,
    pub(crate) pgrp: libc::pid_t,
}

/// Every process visible in `/proc`, skipping those that vanish while read.
pub(crate) fn scan() -> Vec<ProcEntry> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(|pid| parse_stat(pid, &fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect()
}

/// Parses a `/proc/<pid>/stat` line. The command name may hold spaces and
/// parentheses, so the fields are counted from the last `)`.
fn parse_stat(pid: libc::pid_t, stat: &str) -> Option<ProcEntry> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcEntry {
        pid,
        state,
        ppid,
        pgrp,
    })
}

/// True when the initial environment of `pid` holds exactly `marker`
/// (`NAME=value`) as one entry.
/// The PID namespace of `pid` (the target of `/proc/<pid>/ns/pid`), or `None`
/// when the process is gone or not ours to inspect.
pub(crate) fn pid_namespace(pid: libc::pid_t) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

pub(crate) fn has_marker(pid: libc::pid_t, marker: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .map(|environ| {
            environ
                .split(|&byte| byte == 0)
                .any(|entry| entry == marker)
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(stat: &str, expect: Option<(u8, libc::pid_t, libc::pid_t)>) {
        let parsed = parse_stat(7, stat).map(|entry| (entry.state, entry.ppid, entry.pgrp));
        assert_eq!(parsed, expect);
    }

    #[test]
    fn parses_a_plain_line() {
        check("7 (sleep) S 1 7 7 0 -1 4194304", Some((b'S', 1, 7)));
    }

    #[test]
    fn parses_a_name_with_parentheses_and_spaces() {
        check("7 (a) b (c) Z 42 9 9 0", Some((b'Z', 42, 9)));
    }

    #[test]
    fn refuses_a_truncated_line() {
        check("7 (sleep) S", None);
    }

    #[test]
    fn finds_its_own_process() {
        let own = std::process::id() as libc::pid_t;
        assert!(scan().iter().any(|entry| entry.pid == own));
    }
}
