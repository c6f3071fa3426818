//! `toolsmith validate [PATH|NAME]...`: every check discovery applies, one line each, status 1 on any failure.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
use toolsmith_registry::{CheckStatus, FileReport, ToolName};

use crate::args::ValidateArgs;
use crate::exit::ExitStatus;
use crate::output::{self, Paint};
use crate::settings::GlobalSettings;

/// What one argument of `validate` names.
enum Target {
    /// A file, given by path.
    Path(PathBuf),
    /// A tool, looked up in the tool directories.
    Name(ToolName),
    /// Neither a file nor a valid tool name.
    Invalid { text: String, reason: String },
}

/// An argument is a path when it contains `/` or names an existing file;
/// anything else is a tool name.
fn target(text: &str, global: &GlobalSettings) -> Target {
    if text.contains('/') || global.cwd.join(text).exists() {
        return Target::Path(PathBuf::from(text));
    }
    match ToolName::from_exposed_or_plain(text) {
        Ok(name) => Target::Name(name),
        Err(error) => Target::Invalid {
            text: text.to_owned(),
            reason: error.to_string(),
        },
    }
}

/// One result line: a file's report, or an argument that matched nothing.
enum Entry {
    Report(FileReport),
    Unmatched { target: String, reason: String },
}

impl Entry {
    fn passed(&self) -> bool {
        match self {
            Entry::Report(report) => report.passed(),
            Entry::Unmatched { .. } => false,
        }
    }
}

pub(crate) async fn validate(
    args: &ValidateArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        global.run_config(&global.cwd, None),
        global.policy(None),
    );
    let mut entries = Vec::new();
    if args.targets.is_empty() {
        let reports = toolsmith.validate_dirs(&global.layers, None).await;
        if reports.is_empty() {
            entries.push(Entry::Unmatched {
                target: "the tool directories".to_owned(),
                reason: "no tool files found".to_owned(),
            });
        }
        entries.extend(reports.into_iter().map(Entry::Report));
    }
    for text in &args.targets {
        match target(text, global) {
            Target::Path(path) => entries.extend(
                toolsmith
                    .validate_paths(&[path])
                    .await
                    .into_iter()
                    .map(Entry::Report),
            ),
            Target::Name(name) => {
                let reports = toolsmith.validate_dirs(&global.layers, Some(&name)).await;
                if reports.is_empty() {
                    entries.push(Entry::Unmatched {
                        target: text.clone(),
                        reason: format!("no file provides tool `{name}` in the tool directories"),
                    });
                }
                entries.extend(reports.into_iter().map(Entry::Report));
            }
            Target::Invalid { text, reason } => entries.push(Entry::Unmatched {
                target: text,
                reason: format!("not a file, and not a tool name: {reason}"),
            }),
        }
    }
    let passed = entries.iter().all(Entry::passed);
    if args.json {
        let files: Vec<serde_json::Value> = entries.iter().map(entry_json).collect();
        output::write_json(&json!({"ok": passed, "files": files}))?;
    } else {
        let marks = Marks::for_stdout();
        let mut text = String::new();
        for entry in &entries {
            entry_text(&mut text, entry, &marks).context("cannot format the report")?;
        }
        let failed = entries.iter().filter(|entry| !entry.passed()).count();
        writeln!(
            text,
            "{} checked, {failed} failed",
            plural(entries.len(), "file", "files")
        )
        .context("cannot format the report")?;
        output::write_text(&text)?;
    }
    Ok(if passed {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// The marks in front of each check: symbols when stdout is coloured (a
/// terminal, or `--color always`), words (easy to grep, and readable
/// everywhere) on a pipe, with `NO_COLOR` or `--color never`.
struct Marks {
    passed: String,
    failed: String,
    skipped: String,
    denied: String,
}

impl Marks {
    fn for_stdout() -> Marks {
        if output::colors().stdout {
            Marks {
                passed: Paint::Good.paint("✓"),
                failed: Paint::Bad.paint("✗"),
                skipped: Paint::Dim.paint("-"),
                denied: Paint::Warn.paint("⊘"),
            }
        } else {
            Marks {
                passed: "ok".to_owned(),
                failed: "FAIL".to_owned(),
                skipped: "skip".to_owned(),
                denied: "deny".to_owned(),
            }
        }
    }
}

fn entry_text(text: &mut String, entry: &Entry, marks: &Marks) -> std::fmt::Result {
    match entry {
        Entry::Unmatched { target, reason } => {
            writeln!(text, "{target}")?;
            writeln!(text, "  {} {reason}", marks.failed)?;
        }
        Entry::Report(report) => {
            match &report.name {
                Some(name) => writeln!(text, "{} ({name})", report.path.display())?,
                None => writeln!(text, "{}", report.path.display())?,
            }
            for check in &report.checks {
                match &check.status {
                    CheckStatus::Passed => writeln!(text, "  {} {}", marks.passed, check.label)?,
                    CheckStatus::Failed(reason) => {
                        writeln!(text, "  {} {}: {reason}", marks.failed, check.label)?;
                    }
                    CheckStatus::Skipped => writeln!(
                        text,
                        "  {} {} (not checked: an earlier check failed)",
                        marks.skipped, check.label
                    )?,
                    CheckStatus::Denied(reason) => writeln!(
                        text,
                        "  {} {}: {reason}; nothing was run, and the checks that need its description are not made",
                        marks.denied, check.label
                    )?,
                }
            }
            for warning in &report.warnings {
                writeln!(text, "  warning: {warning}")?;
            }
        }
    }
    Ok(())
}

fn entry_json(entry: &Entry) -> serde_json::Value {
    match entry {
        Entry::Unmatched { target, reason } => json!({
            "target": target,
            "ok": false,
            "error": reason,
            "checks": [],
        }),
        Entry::Report(report) => {
            let checks: Vec<serde_json::Value> = report
                .checks
                .iter()
                .map(|check| {
                    let (status, error) = match &check.status {
                        CheckStatus::Passed => ("passed", None),
                        CheckStatus::Failed(reason) => ("failed", Some(reason)),
                        CheckStatus::Skipped => ("skipped", None),
                        CheckStatus::Denied(reason) => ("denied", Some(reason)),
                    };
                    json!({
                        "check": check.kind.code(),
                        "label": check.label,
                        "status": status,
                        "error": error,
                    })
                })
                .collect();
            let mut entry = json!({
                "path": report.path,
                "name": report.name.as_ref().map(ToolName::as_str),
                "ok": report.passed(),
                "checks": checks,
            });
            // Only manifests with second interpreters have warnings; other entries keep their shape.
            if !report.warnings.is_empty() {
                entry["warnings"] = json!(report.warnings);
            }
            entry
        }
    }
}

fn plural(count: usize, one: &str, many: &str) -> String {
    if count == 1 {
        format!("1 {one}")
    } else {
        format!("{count} {many}")
    }
}
