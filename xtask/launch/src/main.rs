//! `cargo xtask`'s front door: `install` and `man` build only the `toolsmith` binary; every other task is handed to the `xtask` package.
//!
//! `cargo xtask` (the alias in `.cargo/config.toml`) runs this package, so cargo compiles it
//! before anything can be printed. It has no dependency: a fresh clone compiles it in a second or
//! two, and the set-up says what it does from its first seconds. The `xtask` package (bench,
//! tidy, codegen: tokio, syn, the toolsmith crates) is compiled only for the tasks that need it,
//! so `cargo xtask install` compiles each crate of the workspace once, in the release build it
//! runs; the man pages and completions come from the binary that build made (its hidden
//! `toolsmith man` and `toolsmith completions`).
#![expect(
    clippy::print_stderr,
    reason = "xtask is a terminal tool: it reports progress and errors on stderr"
)]

// The rule for starting cargo from xtask is the `xtask` package's own file, shared rather than
// copied: this package has no dependency to share it through.
#[path = "../../src/cargo.rs"]
mod cargo;
mod install;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How `cargo xtask` exits (the same statuses as the `xtask` package's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExitStatus {
    /// The task ran and succeeded.
    Success = 0,
    /// Bad usage, or the task could not run.
    Error = 2,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status as u8)
    }
}

/// The one line a failed task prints after `error: `.
///
/// A string rather than `anyhow::Error`: this package has no dependency (see the top of this file).
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("install") => install::parse_install(&args[1..])
            .and_then(|(prefix, debug)| install::install(&project_root(), &prefix, debug)),
        Some("man") => install::parse_man(&args[1..]).and_then(|out| {
            let root = project_root();
            let out = out.unwrap_or_else(|| install::target_dir(&root).join("man"));
            install::man(&root, &out)
        }),
        _ => return forward(&args),
    };
    match result {
        Ok(()) => ExitStatus::Success.into(),
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitStatus::Error.into()
        }
    }
}

/// Runs `cargo run --package xtask -- ARGS` and exits as it did.
fn forward(args: &[String]) -> ExitCode {
    let status = cargo::command()
        .args(["run", "--package", "xtask", "--"])
        .args(args)
        .current_dir(project_root())
        .status();
    match status {
        Ok(status) => match status.code().and_then(|code| u8::try_from(code).ok()) {
            Some(code) => ExitCode::from(code),
            None => ExitStatus::Error.into(),
        },
        Err(error) => {
            eprintln!(
                "error: could not start `{}`: {error}",
                cargo::program().to_string_lossy()
            );
            ExitStatus::Error.into()
        }
    }
}

/// The workspace root: this package lives two levels below it.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("invariant: xtask/launch is two levels below the workspace root")
        .to_path_buf()
}
