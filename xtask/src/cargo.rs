//! The cargo that xtask runs, with the environment of a cargo started from a shell.
//!
//! `cargo xtask` is `cargo run`, which gives xtask the variables cargo sets for a package
//! (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...). A cargo started from xtask would inherit
//! them, and a build script that tracks one (ring's does, with `rerun-if-env-changed`) sees
//! it change between a cargo started from a shell and one started from xtask: ring, rustls
//! and everything above them were rebuilt at each switch, several times per CI run.

use std::ffi::{OsStr, OsString};
use std::process::Command;

/// The cargo that runs xtask (`$CARGO`), else `cargo` on `PATH`.
pub(crate) fn program() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"))
}

/// A command running [`program`] without the variables cargo set for xtask's own package.
pub(crate) fn command() -> Command {
    #[expect(
        clippy::disallowed_methods,
        reason = "xtask drives cargo; it runs no tools"
    )]
    let mut command = Command::new(program());
    for (name, _) in std::env::vars_os() {
        if is_set_for_a_package(&name) {
            command.env_remove(name);
        }
    }
    command
}

/// Whether cargo sets `name` for the package it builds or runs, rather than taking it from
/// the caller (`CARGO`, `CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_INCREMENTAL`, ... are kept).
fn is_set_for_a_package(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
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
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::is_set_for_a_package;

    #[test]
    fn package_variables_are_dropped_and_the_callers_kept() {
        for dropped in [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "OUT_DIR",
        ] {
            assert!(is_set_for_a_package(OsStr::new(dropped)), "{dropped}");
        }
        for kept in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO_TERM_COLOR",
            "CARGO_BUILD_JOBS",
            "RUSTDOCFLAGS",
            "PATH",
        ] {
            assert!(!is_set_for_a_package(OsStr::new(kept)), "{kept}");
        }
    }
}
