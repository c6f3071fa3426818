//! `cargo xtask`: workspace automation (ci, tidy, codegen, bench, soak, new-tool), run through the alias in `.cargo/config.toml`.
//!
//! The alias runs `xtask-launch` (xtask/launch), which does `install` and `man` itself and hands
//! every other task to this package: `install` must not compile this package's dependencies.
//!
//! Every task is a plain function in a module named after it; this file only
//! parses the command line, dispatches, and maps the result to an exit status.
#![expect(
    clippy::print_stderr,
    reason = "xtask is a terminal tool: it reports progress, violations and errors on stderr"
)]

mod bare_relay;
mod bench;
mod cargo;
mod ci;
mod codegen;
mod creations_bench;
mod discovery_bench;
mod egress_bench;
mod filter_bench;
mod flags;
mod generate_bench;
mod generated_bench;
mod mcp_bench;
mod measure;
mod mechanisms;
mod new_tool;
mod registry_layers;
mod soak;
mod tidy;

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::flags::Task;

/// How `cargo xtask` exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExitStatus {
    /// The task ran and everything it checked passed.
    Success = 0,
    /// The task ran and a check failed: a CI step, a tidy rule, or a benchmarked run.
    Failure = 1,
    /// Bad usage, or the task could not run at all.
    Error = 2,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status as u8)
    }
}

/// A check that ran and failed, as opposed to an error that kept a task from running.
///
/// Tasks return it inside `anyhow::Error` so that `main` can tell the two apart.
#[derive(Debug)]
pub(crate) struct CheckFailed(pub(crate) String);

impl fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckFailed {}

fn main() -> ExitCode {
    let task = match flags::parse(std::env::args().skip(1)) {
        Ok(task) => task,
        Err(usage_error) => {
            eprintln!("error: {usage_error}\n\n{}", flags::USAGE);
            return ExitStatus::Error.into();
        }
    };
    let result = match task {
        Task::Help => print_usage(),
        Task::Ci => ci::run(&project_root()),
        Task::Tidy => tidy::run(&project_root()),
        Task::Codegen { check } => codegen::run(&project_root(), check),
        Task::Soak => soak::run(&project_root()),
        Task::Bench(settings) => bench::run(&settings, &project_root()),
        Task::NewTool { name, language } => new_tool::run(&project_root(), &name, &language),
    };
    exit_status(result).into()
}

fn print_usage() -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{}", flags::USAGE)?;
    Ok(stdout.flush()?)
}

fn exit_status(result: anyhow::Result<()>) -> ExitStatus {
    let Err(error) = result else {
        return ExitStatus::Success;
    };
    let broken_pipe = error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<io::Error>())
        .any(|io_error| io_error.kind() == io::ErrorKind::BrokenPipe);
    if broken_pipe {
        // The reader of our stdout went away (e.g. `| head`); that is not a failure.
        return ExitStatus::Success;
    }
    eprintln!("error: {error:#}");
    if error.downcast_ref::<CheckFailed>().is_some() {
        ExitStatus::Failure
    } else {
        ExitStatus::Error
    }
}

/// The workspace root: xtask always lives one level below it.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("invariant: xtask's manifest directory is a child of the workspace root")
        .to_path_buf()
}
