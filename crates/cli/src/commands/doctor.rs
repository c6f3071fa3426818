//! `toolsmith doctor`: what the kernel allows, the tool directories and the problems found in them, the interpreters the tools need, and the effective config, each with a fix where one exists.
//!
//! The report is a list of sections, each a list of [`Check`]s; a section is
//! added by writing one function that returns its checks (the sandbox
//! mechanisms are [`sandbox_checks`]). Only `Problem` checks make the status 1:
//! a kernel feature that is missing has a fallback, so it is a `Warn`.

mod interpreters;
mod render;
mod sandbox;
mod secrets;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
use toolsmith_registry::{CACHE_FILE, Catalog, ProbeSandboxReport, Problem, ProblemError};

use crate::args::DoctorArgs;
use crate::commands::discover;
use crate::commands::doctor::interpreters::interpreter_checks;
use crate::commands::doctor::sandbox::{
    Secrets, Support, kernel_checks, memory_line, privileges_line, sandbox_checks, sandbox_support,
    secrets_protection,
};
use crate::exit::ExitStatus;
use crate::output::{self, Cell, Paint};
use crate::progress::DiscoveryBar;
use crate::settings::{Effective, GlobalSettings, Origin};
use crate::trust::Verdict;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Works.
    Ok,
    /// Missing or weaker than it could be, with a fallback in place.
    Warn,
    /// Broken: something a user expects does not work (status 1).
    Problem,
    /// Neither good nor bad: a fact about the set-up.
    Info,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Problem => "problem",
            Status::Info => "info",
        }
    }

    fn cell(self) -> Cell {
        let paint = match self {
            Status::Ok => Paint::Good,
            Status::Warn => Paint::Warn,
            Status::Problem => Paint::Bad,
            Status::Info => Paint::Dim,
        };
        Cell::painted(self.as_str(), paint)
    }
}

/// One line of the report.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    /// What was checked: a kernel feature, a directory, a file, a config key.
    pub(crate) name: String,
    pub(crate) status: Status,
    /// What was found.
    pub(crate) detail: String,
    /// What to do about it, when something can be done.
    pub(crate) fix: Option<String>,
}

/// Everything `doctor` found, gathered before it is written as JSON or as text.
struct Report<'run> {
    global: &'run GlobalSettings,
    executor: &'run Executor,
    catalog: Catalog,
    kernel: Vec<Check>,
    support: [Support<'run>; 8],
    sandbox: Vec<Check>,
    secrets: Secrets,
    /// `[secrets.NAME]`: each defined secret and who gets it, and the tools that declare a
    /// secret they are not granted.
    defined_secrets: Vec<Check>,
    probes: ProbeSandboxReport,
    privileges: String,
    memory: String,
    directories: Vec<Check>,
    problems: Vec<Check>,
    interpreters: Vec<Check>,
    trust: Vec<Check>,
    settings: Vec<Effective>,
    problem_count: usize,
    cache_file: Option<PathBuf>,
}

/// Runs every check and prints the report; status 1 when a problem was found.
pub(crate) async fn doctor(
    args: &DoctorArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let report = gather(global, executor).await;
    if args.json {
        output::write_json(&render::report_json(&report))?;
    } else {
        let text = render::report_text(&report).context("cannot format the report")?;
        output::write_text(&text)?;
    }
    Ok(status(report.problem_count))
}

/// Discovers the tools and runs every check.
async fn gather<'run>(global: &'run GlobalSettings, executor: &'run Arc<Executor>) -> Report<'run> {
    let config = global.run_config(&global.cwd, None);
    let bar = DiscoveryBar::new();
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        config.clone(),
        global.policy(None),
    );
    let catalog = discover::discover(global, &toolsmith, &|progress| {
        bar.update(progress);
    })
    .await;
    bar.finish();
    let kernel = kernel_checks(executor);
    let support = sandbox_support(executor.features());
    let mut sandbox = sandbox_checks(&support);
    if global.sandbox.profile == toolsmith_registry::SandboxProfile::Compat {
        sandbox.push(Check {
            name: "profile".to_owned(),
            status: Status::Warn,
            detail: "[sandbox] profile = \"compat\": every tool gets the user's filesystem and the host's network, as before least privilege became the default".to_owned(),
            fix: Some("grant what each tool needs ([tools.NAME] network = [...], filesystem = [...]; docs/operators.md, \"Granting\") and remove profile = \"compat\"".to_owned()),
        });
    }
    let secrets = secrets_protection(executor.features());
    let probes = toolsmith_registry::probe_sandbox_report(executor.features());
    let privileges = privileges_line(global);
    let memory = memory_line();
    let mut directories = directory_checks(global, &catalog);
    directories.extend(history_checks(global));
    let mut problems = problem_checks(&catalog);
    problems.extend(definition_checks(global, &catalog));
    let tools_path = config
        .env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_os_str());
    let interpreters = interpreter_checks(&catalog, tools_path);
    let trust = trust_checks(global);
    let defined_secrets = secrets::secret_checks(global, executor, &catalog, &config).await;
    let settings = global.effective();
    let problem_count = kernel
        .iter()
        .chain(&sandbox)
        .chain(&directories)
        .chain(&problems)
        .chain(&interpreters)
        .chain(&trust)
        .chain(&defined_secrets)
        .filter(|check| check.status == Status::Problem)
        .count();
    let cache_file = global.cache_dir.as_ref().map(|dir| dir.join(CACHE_FILE));
    Report {
        global,
        executor,
        catalog,
        kernel,
        support,
        sandbox,
        secrets,
        defined_secrets,
        probes,
        privileges,
        memory,
        directories,
        problems,
        interpreters,
        trust,
        settings,
        problem_count,
        cache_file,
    }
}

/// Pinned definitions: each tool whose definition changed since it was last listed (this
/// discovery included), with when and the old and new digests. Information, not a problem:
/// the operator decides whether the change was expected.
fn definition_checks(global: &GlobalSettings, catalog: &Catalog) -> Vec<Check> {
    let audit = global
        .audit_path
        .as_deref()
        .and_then(|path| toolsmith_registry::AuditLog::open(path).ok());
    let mut definitions = discover::definitions(global);
    discover::observe_definitions(&mut definitions, catalog, audit.as_ref());
    definitions
        .last_changes()
        .map(|change| Check {
            name: format!("definition of {}", change.name),
            status: Status::Info,
            detail: format!(
                "changed since it was last listed (seen {}): sha256 {} -> {}",
                change.seen, change.old_sha256, change.new_sha256
            ),
            fix: Some(format!(
                "`toolsmith show {}` shows what agents see now; if the change was not expected, restore or remove the tool",
                change.name
            )),
        })
        .collect()
}

/// The history of generated tools: each tool's chain read and every object checked.
fn history_checks(global: &GlobalSettings) -> Vec<Check> {
    let tools_dir = &global.generator_tools_dir;
    toolsmith_generator::check_histories(tools_dir)
        .into_iter()
        .map(|(tool, outcome)| {
            let name = format!("history of {tool}");
            match outcome {
                Ok(versions) => Check {
                    name,
                    status: Status::Ok,
                    detail: format!("{versions} version(s), every object intact"),
                    fix: None,
                },
                Err(error) => Check {
                    name,
                    status: Status::Problem,
                    detail: toolsmith_registry::error_chain(&error),
                    fix: Some(format!(
                        "`toolsmith history {tool}` repairs a stale lock; a damaged object needs {} moved aside or restored from a backup",
                        tools_dir.join(toolsmith_generator::HISTORY_DIR).display()
                    )),
                },
            }
        })
        .collect()
}

/// The project's trust: each directory considered (trusted, or skipped with the command that
/// trusts it), then each value of the project config that would have loosened the user's
/// settings (a problem: the project asked for something it did not get).
fn trust_checks(global: &GlobalSettings) -> Vec<Check> {
    let report = &global.trust;
    let mut checks = Vec::new();
    if global.project_named_over_home {
        checks.push(Check {
            name: global.project_dir.display().to_string(),
            status: Status::Warn,
            detail: format!(
                "the project ({}) is $HOME, / or holds $HOME: `filesystem = \"project\"` tools may write your shell start-up files and everything else there but toolsmith's own state",
                global.project_source.describe()
            ),
            fix: Some("name a directory below your home as the project (--project DIR)".to_owned()),
        });
    }
    for unit in &report.units {
        let (status, detail, fix) = match &unit.verdict {
            Verdict::Recorded => (Status::Ok, "trusted".to_owned(), None),
            Verdict::PreTrusted(root) => (
                Status::Ok,
                format!("trusted by [trust] paths ({})", root.display()),
                None,
            ),
            // Not trusted, but there is nothing to read: nothing to say.
            _ if unit.skipped.is_empty() => continue,
            verdict => (
                Status::Warn,
                format!(
                    "{}: skipped {}",
                    match verdict {
                        Verdict::ConfigChanged => "its config changed since it was trusted",
                        _ => "not trusted",
                    },
                    unit.skipped
                        .iter()
                        .map(|path| path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some(format!("toolsmith trust {}", unit.dir.display())),
            ),
        };
        checks.push(Check {
            name: unit.dir.display().to_string(),
            status,
            detail,
            fix,
        });
    }
    for loosening in &report.loosenings {
        checks.push(Check {
            name: loosening.key.clone(),
            status: Status::Problem,
            detail: format!("the project config's {} would loosen the user's {}; {} applies", loosening.project, loosening.applied, loosening.applied),
            fix: Some("remove it from .toolsmith/config.toml, or set `[trust] project_may_loosen = true` in the user config".to_owned()),
        });
    }
    if report.ignored_trust_section {
        checks.push(Check {
            name: "trust".to_owned(),
            status: Status::Problem,
            detail: "a project config cannot set [trust]; it was ignored".to_owned(),
            fix: Some(
                "remove [trust] from .toolsmith/config.toml; set it in the user config".to_owned(),
            ),
        });
    }
    checks
}

fn status(problem_count: usize) -> ExitStatus {
    if problem_count == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    }
}

pub(crate) fn origin_json(origin: Origin) -> serde_json::Value {
    match origin {
        Origin::Flag(flag) => json!({"kind": "flag", "name": flag}),
        Origin::Env(name) => json!({"kind": "env", "name": name}),
        Origin::File => json!({"kind": "file"}),
        Origin::UserFile => json!({"kind": "user_file"}),
        Origin::Default => json!({"kind": "default"}),
    }
}

/// A checks table: name, status, detail, and the fix on a line of its own below.
pub(crate) fn checks_table(checks: &[Check]) -> String {
    let rows: Vec<Vec<Cell>> = checks
        .iter()
        .map(|check| {
            vec![
                Cell::plain(check.name.clone()),
                check.status.cell(),
                Cell::plain(check.detail.clone()),
            ]
        })
        .collect();
    let table = output::table("  ", &[], &rows);
    let mut text = String::new();
    for (line, check) in table.lines().zip(checks) {
        text.push_str(line);
        text.push('\n');
        if let Some(fix) = &check.fix {
            text.push_str(&format!("    {} {fix}\n", Paint::Warn.paint("fix:")));
        }
    }
    text
}

/// One line per tool directory: how many tools it provides, or why it provides none.
fn directory_checks(global: &GlobalSettings, catalog: &Catalog) -> Vec<Check> {
    global
        .layers
        .iter()
        .map(|layer_dir| {
            let dir = &layer_dir.dir;
            let layer = layer_dir.layer.as_str();
            // The default layers are optional: one that does not exist is listed, and is no
            // problem with anything to fix. A directory someone named must exist.
            let named = global.explicit_dirs || layer == "config";
            if !dir.is_dir() {
                return if named {
                    Check {
                        name: layer.to_owned(),
                        status: Status::Problem,
                        detail: format!("{} (missing)", dir.display()),
                        fix: Some(format!(
                            "create it (mkdir -p {}) or stop naming it",
                            dir.display()
                        )),
                    }
                } else {
                    Check {
                        name: layer.to_owned(),
                        status: Status::Info,
                        detail: format!("{} (none; optional)", dir.display()),
                        fix: None,
                    }
                };
            }
            let count = tool_count(catalog, dir);
            Check {
                name: layer.to_owned(),
                status: Status::Ok,
                detail: format!(
                    "{} ({count} {})",
                    dir.display(),
                    if count == 1 { "tool" } else { "tools" }
                ),
                fix: None,
            }
        })
        .collect()
}

/// The tools a directory provides, shadowed or not.
pub(crate) fn tool_count(catalog: &Catalog, dir: &Path) -> usize {
    catalog
        .tools()
        .iter()
        .filter(|tool| tool.source() == dir)
        .count()
        + catalog
            .shadowed()
            .iter()
            .filter(|shadowed| shadowed.tool.source() == dir)
            .count()
}

/// One line per file (or directory) that failed to load, with the fix.
fn problem_checks(catalog: &Catalog) -> Vec<Check> {
    catalog
        .problems()
        .iter()
        .map(|problem| Check {
            name: problem.path.display().to_string(),
            status: Status::Problem,
            detail: problem.message(),
            fix: Some(problem_fix(problem)),
        })
        .collect()
}

fn problem_fix(problem: &Problem) -> String {
    let path = problem.path.display();
    match &problem.error {
        ProblemError::ReadDir { .. } => {
            format!("make {path} a readable directory, or stop naming it")
        }
        ProblemError::LinkedLayer => {
            format!("make {path} a directory of the project, not a symbolic link")
        }
        ProblemError::BrokenLink { .. } => {
            format!("point the link at the tool (ln -sfn TARGET {path}) or remove it")
        }
        ProblemError::NotExecutable => format!("chmod +x {path}"),
        ProblemError::NotRegular { .. } => {
            format!("remove {path}, or replace it with the tool's regular file")
        }
        ProblemError::NonUtf8FileName | ProblemError::FileName { .. } => format!(
            "rename {path}: lower-case letters, digits and `_` (`-` is read as `_`), starting with a letter"
        ),
        ProblemError::Duplicate { .. } => "keep one of the two files, or rename one".to_owned(),
        _ => format!("`toolsmith validate {path}` runs every check and shows which one fails"),
    }
}
