//! `cargo xtask soak`: the long soak of `toolsmith serve`, 10 000 sequential calls over one
//! connection, checking that the server's fds, threads, memory and processes do not grow.
//!
//! It is the black-box test `load::soak_sequential_calls` run alone with
//! `TOOLSMITH_SOAK_CALLS=10000`; a plain `cargo test` runs it with 1000 calls.

use std::path::Path;

use anyhow::Context;

use crate::CheckFailed;

/// The black-box test that soaks, in the test binary `main` of `toolsmith-tests`.
pub(crate) const TEST: &str = "load::soak_sequential_calls";

/// The number of calls of the long soak.
const SOAK_CALLS: &str = "10000";

/// Runs the soak test in `root`; its output (with the measured figures) is inherited.
pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    let cargo = crate::cargo::program();
    // `--workspace`, as CI's `cargo test --workspace` step: the same packages give the same
    // feature set (tokio with the executor's `test-util`, ...), so the soak reuses that build
    // instead of building the workspace and the test binary again; `--test main` picks the one
    // binary that holds the soak.
    let args = [
        "test",
        "--workspace",
        "--test",
        "main",
        "--",
        "--exact",
        TEST,
        "--nocapture",
    ];
    let status = crate::cargo::command()
        .args(args)
        .env("TOOLSMITH_SOAK_CALLS", SOAK_CALLS)
        .current_dir(root)
        .status()
        .with_context(|| format!("could not start `{}`", cargo.to_string_lossy()))?;
    if !status.success() {
        return Err(CheckFailed(format!(
            "the soak failed: `cargo {}` with TOOLSMITH_SOAK_CALLS={SOAK_CALLS} exited with {status}",
            args.join(" ")
        ))
        .into());
    }
    Ok(())
}
