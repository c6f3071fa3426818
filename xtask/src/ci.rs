//! `cargo xtask ci`: every check CI runs, in order, stopping at the first failure; the long
//! soak (`cargo xtask soak`) last, in place of the short run of its test in `cargo test`.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::CheckFailed;

/// One CI step that runs cargo.
struct CargoStep {
    name: &'static str,
    /// The directory cargo runs in, relative to the root: `.` for the workspace.
    dir: &'static str,
    args: &'static [&'static str],
    /// Rustdoc flags added for this step only.
    rustdoc_flags: Option<&'static str>,
}

/// The cargo steps, cheapest and most likely to fail first. Tidy runs after them.
const CARGO_STEPS: &[CargoStep] = &[
    CargoStep {
        name: "fmt",
        dir: ".",
        args: &["fmt", "--all", "--", "--check"],
        rustdoc_flags: None,
    },
    CargoStep {
        name: "clippy",
        dir: ".",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        rustdoc_flags: None,
    },
    // The soak's test is skipped here: the soak step (last) runs the same test with ten times
    // its plain 1000 calls, which proves all the 1000 would, and the 1000 cost some 20 s.
    CargoStep {
        name: "test",
        dir: ".",
        args: &[
            "test",
            "--workspace",
            "--",
            "--exact",
            "--skip",
            crate::soak::TEST,
        ],
        rustdoc_flags: None,
    },
    // `--examples` makes cargo resolve features with the dev-dependencies, as clippy's
    // `--all-targets` did: the dependencies are then the ones clippy checked, not some sixty
    // crates checked again with a smaller feature set (libc without `extra_traits`, tokio
    // without `test-util`, ...). Naming a target kind drops the default set, so `--lib --bins`
    // name what a plain `cargo doc` documents (`--bins` also takes the test crate's copy of
    // the binary, `doc = false`: five lines, and rustdoc's checks cover it too).
    CargoStep {
        name: "doc",
        dir: ".",
        args: &[
            "doc",
            "--workspace",
            "--no-deps",
            "--lib",
            "--bins",
            "--examples",
        ],
        rustdoc_flags: Some("-D warnings"),
    },
    // The rig example (examples/rig) is a workspace of its own (its manifest says why), so
    // the workspace's steps do not see it. Run in its directory, cargo reads its
    // `.cargo/config.toml`, which builds into the root `target/`: the dependencies it shares
    // with the workspace are not built again. Its test runs the example and checks a call.
    CargoStep {
        name: "rig-fmt",
        dir: RIG_EXAMPLE,
        args: &["fmt", "--", "--check"],
        rustdoc_flags: None,
    },
    CargoStep {
        name: "rig-clippy",
        dir: RIG_EXAMPLE,
        args: &["clippy", "--all-targets", "--", "-D", "warnings"],
        rustdoc_flags: None,
    },
    CargoStep {
        name: "rig-test",
        dir: RIG_EXAMPLE,
        args: &["test"],
        rustdoc_flags: None,
    },
];

/// The example crate that hands toolsmith's tools to rig.
const RIG_EXAMPLE: &str = "examples/rig";

/// Runs every step in `root`, printing each step's name and duration on stderr.
pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    let cargo = crate::cargo::program();
    let mut timings: Vec<(&str, Duration)> = Vec::new();
    for step in CARGO_STEPS {
        let command_line = match step.dir {
            "." => format!("cargo {}", step.args.join(" ")),
            dir => format!("(cd {dir} && cargo {})", step.args.join(" ")),
        };
        let started = step_started(step.name, &command_line);
        let mut command = crate::cargo::command();
        command.args(step.args).current_dir(root.join(step.dir));
        if let Some(flags) = step.rustdoc_flags {
            command.env("RUSTDOCFLAGS", rustdoc_flags_with(flags));
        }
        // stdio is inherited: `cargo test` output reaches CI unchanged.
        let status = command
            .status()
            .with_context(|| format!("could not start `{}`", cargo.to_string_lossy()))?;
        let elapsed = step_finished(step.name, started, status.success());
        timings.push((step.name, elapsed));
        if !status.success() {
            return Err(CheckFailed(format!(
                "ci step `{}` failed: `{command_line}` exited with {status}",
                step.name,
            ))
            .into());
        }
    }
    let started = step_started("tidy", "cargo xtask tidy");
    let tidy_result = crate::tidy::run(root);
    timings.push(("tidy", step_finished("tidy", started, tidy_result.is_ok())));
    tidy_result.context("ci step `tidy` failed")?;
    let started = step_started("codegen", "cargo xtask codegen --check");
    let codegen_result = crate::codegen::run(root, true);
    timings.push((
        "codegen",
        step_finished("codegen", started, codegen_result.is_ok()),
    ));
    codegen_result.context("ci step `codegen` failed")?;
    let started = step_started("soak", "cargo xtask soak");
    let soak_result = crate::soak::run(root);
    timings.push(("soak", step_finished("soak", started, soak_result.is_ok())));
    soak_result?;
    let summary: Vec<String> = timings
        .iter()
        .map(|(name, elapsed)| format!("{name} {:.1}s", elapsed.as_secs_f64()))
        .collect();
    eprintln!("ci: all steps passed ({})", summary.join(", "));
    Ok(())
}

/// The caller's `RUSTDOCFLAGS` with `extra` appended, so a local setting is kept.
fn rustdoc_flags_with(extra: &str) -> OsString {
    match std::env::var_os("RUSTDOCFLAGS") {
        Some(existing) if !existing.is_empty() => {
            let mut flags = existing;
            flags.push(" ");
            flags.push(extra);
            flags
        }
        _ => OsString::from(extra),
    }
}

fn step_started(name: &str, command_line: &str) -> Instant {
    eprintln!("ci: step `{name}`: {command_line}");
    Instant::now()
}

fn step_finished(name: &str, started: Instant, passed: bool) -> Duration {
    let elapsed = started.elapsed();
    let verdict = if passed { "passed" } else { "FAILED" };
    eprintln!(
        "ci: step `{name}` {verdict} in {:.1}s",
        elapsed.as_secs_f64()
    );
    elapsed
}
