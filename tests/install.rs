//! `cargo xtask install --prefix DIR`: the installed binary finds its system tools without any flag; the set-up speaks from its first seconds and compiles each crate once.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::context::{repository_root, target_dir};

/// `cargo`, as the test was built with, in the environment of a cargo started from a shell.
///
/// Without the variables cargo set for this test's package (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_NAME`, ...): ring's build script tracks some of them, and a cargo that saw them
/// change rebuilt ring, rustls and the workspace above them (a minute a switch on 2 cores).
fn cargo() -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the install test runs `cargo xtask install` as a user would"
    )]
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // The rule of `xtask/src/cargo.rs`, which this crate cannot import (xtask is a binary).
    for (name, _) in std::env::vars_os() {
        let set_for_this_package = name.to_str().is_some_and(|name| {
            name.starts_with("CARGO_PKG_")
                || name.starts_with("CARGO_MANIFEST_")
                || matches!(
                    name,
                    "CARGO_CRATE_NAME"
                        | "CARGO_BIN_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "CARGO_RUSTC_CURRENT_DIR"
                        | "OUT_DIR"
                )
        });
        if set_for_this_package {
            command.env_remove(name);
        }
    }
    command
        .current_dir(repository_root())
        .env("CARGO_TARGET_DIR", target_dir());
    command
}

/// The installed binary, run from `project` with an empty home: only the system layer has tools.
fn installed(prefix: &Path, home: &Path, project: &Path) -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "the install test runs the installed binary"
    )]
    let mut command = Command::new(prefix.join("bin/toolsmith"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .current_dir(project);
    command
}

#[test]
fn install_into_a_prefix_then_find_system_tools_without_a_flag() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().canonicalize().unwrap();
    let prefix = root.join("prefix");
    let (home, project) = (root.join("home"), root.join("project"));
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&project).unwrap();
    // The dev profile keeps the test cheap; the layout is the same as a release install.
    // Verbose, cargo names every crate each of its builds takes in, compiled or fresh: see
    // `each_crate_once`. `-v` also makes a `--quiet` alias an error instead of hiding a build.
    let output = cargo()
        .env("CARGO_TERM_VERBOSE", "true")
        .args(["-v", "xtask", "install", "--debug", "--prefix"])
        .arg(&prefix)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    each_crate_once(&stderr);

    for file in [
        "bin/toolsmith",
        "libexec/toolsmith/read-file.md",
        "libexec/toolsmith/list-dir.md",
        "libexec/toolsmith/search-text.md",
        "share/man/man1/toolsmith.1",
        "share/man/man1/toolsmith-list.1",
        "share/man/man1/toolsmith-doctor.1",
        "share/bash-completion/completions/toolsmith",
        "share/zsh/site-functions/_toolsmith",
        "share/fish/vendor_completions.d/toolsmith.fish",
    ] {
        assert!(prefix.join(file).is_file(), "{file} was not installed");
    }
    let man = fs::read_to_string(prefix.join("share/man/man1/toolsmith.1")).unwrap();
    assert!(man.contains(".TH toolsmith 1"), "{man}");

    let output = installed(&prefix, &home, &project)
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let listing: Value = serde_json::from_slice(&output.stdout).unwrap();
    let system: Vec<(&str, &str)> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap(),
                tool["layer"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        system,
        [
            ("list_dir", "system"),
            ("read_file", "system"),
            ("search_text", "system")
        ]
    );

    fs::write(project.join("notes.txt"), "first\nsecond\n").unwrap();
    let output = installed(&prefix, &home, &project)
        .args(["run", "read_file", "--input", r#"{"path": "notes.txt"}"#])
        .output()
        .unwrap();
    let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        envelope["result"], "     1  first\n     2  second",
        "{envelope}"
    );

    // A reinstall replaces the files in place and removes tools no longer bundled.
    fs::write(prefix.join("libexec/toolsmith/stale.md"), "").unwrap();
    let output = cargo()
        .args(["xtask", "install", "--debug", "--prefix"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(!prefix.join("libexec/toolsmith/stale.md").exists());
}

/// The install takes each crate into one build only: counted from cargo's own lines, where a
/// verbose cargo names each crate of a build once, as `Compiling` or `Fresh`. A crate named by
/// two builds (xtask's own and the binary's, as when xtask linked the CLI) is compiled twice on a
/// fresh clone, in two profiles; and before xtask's first line, cargo built xtask-launch alone.
fn each_crate_once(stderr: &str) {
    let mut builds: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for line in stderr.lines() {
        let mut words = line.split_whitespace();
        if let (Some("Compiling" | "Fresh"), Some(name), Some(version)) =
            (words.next(), words.next(), words.next())
        {
            *builds.entry((name, version)).or_default() += 1;
        }
    }
    assert!(builds.len() > 100, "cargo named too few crates:\n{stderr}");
    let twice: Vec<_> = builds.iter().filter(|(_, count)| **count > 1).collect();
    assert!(
        twice.is_empty(),
        "built more than once: {twice:?}\n{stderr}"
    );
    let before_xtask = stderr
        .split("\ninstall: ")
        .next()
        .unwrap()
        .lines()
        .filter(|line| {
            line.trim_start().starts_with("Compiling") || line.trim_start().starts_with("Fresh")
        });
    for line in before_xtask {
        assert!(line.contains(" xtask-launch v"), "{line}\n{stderr}");
    }
}

/// On a fresh clone (an empty target directory) under an empty HOME, xtask's first line comes
/// within 5 s: before any long compile. cargo's home is the machine's (its registry holds the
/// sources, as on any machine that ran cargo once; without it cargo first downloads them).
#[test]
fn install_speaks_within_5_s_of_a_cold_start() {
    let temp = tempfile::tempdir().unwrap();
    let (home, target, prefix) = (
        temp.path().join("home"),
        temp.path().join("target"),
        temp.path().join("prefix"),
    );
    fs::create_dir_all(&home).unwrap();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(std::path::PathBuf::from)
                .map(|home| home.join(".cargo"))
        })
        .unwrap();
    let started = Instant::now();
    let mut child = cargo()
        .env("HOME", &home)
        .env("CARGO_HOME", cargo_home)
        .env("CARGO_TARGET_DIR", &target)
        .args(["xtask", "install", "--prefix"])
        .arg(&prefix)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = i32::try_from(child.id()).unwrap();
    // Lines come through a thread, so that a cargo that prints nothing (a `--quiet` alias
    // compiling a large xtask) cannot keep the test waiting past its bound.
    let (sender, receiver) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if sender.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let deadline = started + Duration::from_secs(30);
    let mut lines = Vec::new();
    let mut first_line_after = None;
    while let Ok(line) = receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let is_xtasks = line.starts_with("install: ");
        lines.push(line);
        if is_xtasks {
            first_line_after = Some(started.elapsed());
            break;
        }
    }
    // The release build has begun: stop it, with every rustc it started (its process group).
    // SAFETY: kill(2) on the process group this test created; no memory is involved.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
    drop(receiver);
    let _ = reader.join();
    let deadline = Instant::now() + Duration::from_secs(30);
    // SAFETY: as above; signal 0 only asks whether the group still has members.
    while unsafe { libc::kill(-group, 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let first_line_after =
        first_line_after.unwrap_or_else(|| panic!("no line of xtask's within 30 s: {lines:#?}"));
    assert!(
        first_line_after < Duration::from_secs(5),
        "xtask's first line came after {first_line_after:?}: {lines:#?}"
    );
    let first = lines.last().unwrap();
    assert!(
        first.contains("building the toolsmith binary (release profile)"),
        "{first}"
    );
}

#[test]
fn install_without_a_prefix_is_a_usage_error() {
    let output = cargo().args(["xtask", "install"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // cargo's own lines (building and running xtask-launch) come first.
    assert!(
        stderr.ends_with("\nerror: `install` needs `--prefix DIR` (e.g. --prefix ~/.local)\n"),
        "{stderr}"
    );
}
