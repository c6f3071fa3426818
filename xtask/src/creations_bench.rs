//! `cargo xtask bench`, the creations section: what the seccomp supervisor of creations
//! (issue 22, finding 2) costs a call that makes names in its project.
//!
//! One call opens the same 1 000 existing files of the project for writing, in a loop of
//! one Python process, either with `O_CREAT` (as every shell redirection and `fopen("w")`
//! does: each open goes to the supervisor, which opens the file itself and hands it over)
//! or without it (the kernel alone). Both run in the same sandbox (a writable project under
//! the filter, as the default profile), alternate in pairs whose order flips each time,
//! and are timed by the program itself around its loop, so the call's own start-up cancels
//! out. The difference over 1 000 is the supervisor's cost per creating call.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use toolsmith_executor::{
    BackendChoice, Command, Enforcement, Executor, ExecutorConfig, Filesystem, Limits, Privileges,
    Sandbox, Syscalls,
};

use crate::CheckFailed;
use crate::measure::{Stats, render_table};

/// Files opened per call.
const FILES: usize = 1000;

/// The program of a call: opens every file with the given flags, prints the loop's µs.
const PROGRAM: &str = "import os, sys, time\nflags = os.O_WRONLY | (os.O_CREAT if sys.argv[2] == 'create' else 0)\nnames = [os.path.join(sys.argv[1], 'f%d' % i) for i in range(int(sys.argv[3]))]\nstart = time.perf_counter()\nfor name in names:\n    os.close(os.open(name, flags, 0o644))\nprint(int((time.perf_counter() - start) * 1e6))\n";

/// The distributions of both variants, in µs per call's loop.
pub(crate) struct CreationsReport {
    plain: Stats,
    creating: Stats,
    calls: usize,
    supervised: bool,
}

fn call(project: &Path, mode: &str) -> anyhow::Result<Command> {
    let mut command = Command::new(Path::new("/usr/bin/python3"), project)
        .context("could not plan a python3 call")?;
    for arg in [
        "-c",
        PROGRAM,
        &project.join("files").to_string_lossy(),
        mode,
        &FILES.to_string(),
    ] {
        command.arg(std::ffi::OsStr::new(arg));
    }
    command.sandbox(Sandbox {
        filesystem: Filesystem::Project {
            root: project.to_path_buf(),
            enforcement: Enforcement::IfPossible,
        },
        private_pids: true,
        private_mounts: true,
        privileges: Privileges::Drop(None),
        syscalls: Syscalls::Filtered(Enforcement::IfPossible),
        ..Sandbox::none()
    });
    Ok(command)
}

/// The bench's directory, removed when the section ends.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs one call and returns its loop's time in µs.
fn timed(
    runtime: &tokio::runtime::Runtime,
    executor: &Executor,
    command: &Command,
    limits: &Limits,
) -> anyhow::Result<(f64, bool)> {
    let outcome = runtime
        .block_on(executor.run(command, limits))
        .context("the call failed to run")?;
    let text = outcome.stdout.text_lossy();
    let micros = text
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|_| outcome.success());
    let supervised = !outcome
        .sandbox
        .relaxed
        .iter()
        .any(|note| note.contains("new repositories"));
    micros.map(|micros| (micros, supervised)).ok_or_else(|| {
        CheckFailed(format!(
            "the call did not time its loop ({:?}): {text} {}",
            outcome.termination,
            outcome.stderr.text_lossy()
        ))
        .into()
    })
}

/// Measures `calls` calls of each variant, in pairs of alternating order, after warm-ups.
pub(crate) fn measure(calls: usize) -> anyhow::Result<CreationsReport> {
    let scratch = Scratch(
        std::env::temp_dir().join(format!("toolsmith-bench-creations-{}", std::process::id())),
    );
    let project = scratch.0.join("project");
    std::fs::create_dir_all(project.join("files")).context("could not make the files")?;
    for index in 0..FILES {
        std::fs::write(project.join("files").join(format!("f{index}")), b"")
            .context("could not make the files")?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start a tokio runtime")?;
    let executor = {
        let _entered = runtime.enter();
        Executor::new(ExecutorConfig {
            backend: BackendChoice::Auto,
            max_concurrent: None,
        })
        .context("could not create the executor")?
    };
    let (plain, creating) = (call(&project, "plain")?, call(&project, "create")?);
    let limits = Limits {
        timeout: Duration::from_secs(60),
        ..Limits::recommended()
    };
    let mut supervised = true;
    for _ in 0..2 {
        timed(&runtime, &executor, &plain, &limits)?;
        supervised &= timed(&runtime, &executor, &creating, &limits)?.1;
    }
    let (mut plain_samples, mut creating_samples) = (Vec::new(), Vec::new());
    for pair in 0..calls {
        let order = if pair % 2 == 0 {
            [(&plain, false), (&creating, true)]
        } else {
            [(&creating, true), (&plain, false)]
        };
        for (command, is_creating) in order {
            let (micros, _) = timed(&runtime, &executor, command, &limits)?;
            if is_creating {
                creating_samples.push(micros);
            } else {
                plain_samples.push(micros);
            }
        }
    }
    Ok(CreationsReport {
        plain: Stats::of(&plain_samples),
        creating: Stats::of(&creating_samples),
        calls,
        supervised,
    })
}

impl CreationsReport {
    /// The section of the report.
    pub(crate) fn render(&self) -> String {
        let mut report = String::new();
        let _ = writeln!(
            report,
            "supervised creations: {FILES} opens of existing project files for writing in one call, timed by the program (µs per loop), {} calls per variant, alternating (ABBA){}",
            self.calls,
            if self.supervised {
                ""
            } else {
                "; WARNING: the supervisor is unavailable here, both variants run on the kernel alone"
            }
        );
        let header = ["variant", "median", "p90", "ratio"].map(str::to_owned);
        let rows = [
            ("O_WRONLY (the kernel alone)", &self.plain, 1.0),
            (
                "O_WRONLY | O_CREAT (through the supervisor)",
                &self.creating,
                self.creating.median / self.plain.median,
            ),
        ]
        .map(|(label, stats, ratio)| {
            [
                label.to_owned(),
                format!("{:.0}", stats.median),
                format!("{:.0}", stats.p90),
                format!("{ratio:.2}"),
            ]
        });
        report.push_str(&render_table(&header, &rows, 1));
        let _ = writeln!(
            report,
            "the supervisor adds {:.1} µs per creating call (medians, over {FILES} calls)",
            (self.creating.median - self.plain.median) / FILES as f64,
        );
        report
    }
}
