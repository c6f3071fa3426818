//! `cargo xtask install --prefix DIR`: the installed binary finds its system tools without any flag.

use std::fs;
use std::path::Path;
use std::process::Command;

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
    let output = cargo()
        .args(["xtask", "install", "--debug", "--prefix"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

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

#[test]
fn install_without_a_prefix_is_a_usage_error() {
    let output = cargo().args(["xtask", "install"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: `install` needs `--prefix DIR` (e.g. --prefix ~/.local)\n"),
        "{stderr}"
    );
}
