//! `toolsmith doctor`: what the kernel allows, the tool directories and the problems found in them, and the effective config, each with a fix where one exists.
//!
//! The report is a list of sections, each a list of [`Check`]s; a section is
//! added by writing one function that returns its checks (the sandbox
//! mechanisms are [`sandbox_checks`]). Only `Problem` checks make the status 1:
//! a kernel feature that is missing has a fallback, so it is a `Warn`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::{BackendChoice, DISABLE_FEATURES_VAR, Executor, Features, Probe};
use toolsmith_registry::{CACHE_FILE, Catalog, Problem, ProblemError};

use crate::args::DoctorArgs;
use crate::exit::ExitStatus;
use crate::output::{self, Cell, Paint};
use crate::progress::DiscoveryBar;
use crate::settings::{GlobalSettings, Origin};

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

/// Runs every check and prints the report; status 1 when a problem was found.
pub(crate) async fn doctor(
    args: &DoctorArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let config = global.run_config(&global.cwd, None);
    let bar = DiscoveryBar::new();
    let catalog = global
        .discover(executor, &config, &|progress| bar.update(progress))
        .await;
    bar.finish();
    let kernel = kernel_checks(executor);
    let support = sandbox_support(executor.features());
    let sandbox = sandbox_checks(&support);
    let secrets = secrets_protection(executor.features());
    let privileges = privileges_line(global);
    let memory = memory_line();
    let directories = directory_checks(global, &catalog);
    let problems = problem_checks(&catalog);
    let settings = global.effective();
    let problem_count = kernel
        .iter()
        .chain(&sandbox)
        .chain(&directories)
        .chain(&problems)
        .filter(|check| check.status == Status::Problem)
        .count();
    let cache_file = global.cache_dir.as_ref().map(|dir| dir.join(CACHE_FILE));
    if args.json {
        let checks_json = |checks: &[Check]| -> Vec<serde_json::Value> {
            checks
                .iter()
                .map(|check| {
                    json!({
                        "name": check.name,
                        "status": check.status.as_str(),
                        "detail": check.detail,
                        "fix": check.fix,
                    })
                })
                .collect()
        };
        let features: Vec<serde_json::Value> = executor
            .features()
            .checks()
            .iter()
            .map(|(name, probe)| {
                json!({"name": name, "available": probe.available, "detail": probe.detail})
            })
            .collect();
        let tool_dirs: Vec<serde_json::Value> = global
            .layers
            .iter()
            .map(|layer_dir| {
                json!({
                    "layer": layer_dir.layer.as_str(),
                    "path": layer_dir.dir,
                    "exists": layer_dir.dir.is_dir(),
                    "tools": tool_count(&catalog, &layer_dir.dir),
                })
            })
            .collect();
        let settings_json: Vec<serde_json::Value> = settings
            .iter()
            .map(|setting| {
                json!({
                    "key": setting.key,
                    "value": setting.value,
                    "origin": origin_json(setting.origin),
                })
            })
            .collect();
        output::write_json(&json!({
            "ok": problem_count == 0,
            "backend": executor.backend().to_string(),
            "features": features,
            "kernel": checks_json(&kernel),
            "tool_dirs": tool_dirs,
            "directories": checks_json(&directories),
            "problems": checks_json(&problems),
            "config_file": global.config_file,
            "settings": settings_json,
            "cache": {
                "enabled": cache_file.is_some(),
                "file": cache_file,
            },
            "sandbox": {
                "network": global.sandbox.network.as_str(),
                "filesystem": global.sandbox.filesystem.as_str(),
                "project_dir": global.project_dir,
                "support": support.iter().map(|support| json!({
                    "mechanism": support.mechanism,
                    "for": support.purpose,
                    "available": support.probe.available,
                    "detail": support.probe.detail,
                    "fix": support.fix(),
                })).collect::<Vec<_>>(),
                "landlock_abi": executor.features().landlock_abi,
                "secrets": {
                    "protection": secrets.protection,
                    "detail": secrets.detail,
                },
                "syscalls": global.sandbox.syscalls.as_str(),
                "user": global.sandbox.user.map(|user| user.to_string()),
                "privileges": privileges,
                "memory": memory,
            },
        }))?;
        return Ok(status(problem_count));
    }

    let color = output::colors().stdout;
    let title = |text: &str| Paint::Header.paint(text, color);
    let mut text = String::new();
    let write = |text: &mut String| -> std::fmt::Result {
        let chosen = match global.backend {
            BackendChoice::Auto => "auto: the strongest this kernel allows",
            BackendChoice::Only(_) => "pinned by configuration",
        };
        writeln!(
            text,
            "{} {} ({chosen})",
            title("backend:"),
            Paint::Name.paint(&executor.backend().to_string(), color)
        )?;
        writeln!(text)?;
        writeln!(text, "{}", title("kernel:"))?;
        text.push_str(&checks_table(&kernel, color));
        writeln!(text)?;
        writeln!(
            text,
            "{} network = {}, filesystem = {} (project: {})",
            title("sandbox:"),
            global.sandbox.network,
            global.sandbox.filesystem,
            global.project_dir.display()
        )?;
        text.push_str(&checks_table(&sandbox, color));
        writeln!(
            text,
            "  secrets: {} ({})",
            Paint::Name.paint(secrets.protection, color),
            secrets.detail
        )?;
        writeln!(text, "  privileges: {privileges}")?;
        writeln!(text, "  toolsmith's memory: {memory}")?;
        writeln!(text)?;
        if global.explicit_dirs {
            writeln!(
                text,
                "{}",
                title("tool directories (--tools-dir, lowest precedence first):")
            )?;
        } else {
            writeln!(
                text,
                "{}",
                title("tool directories (layers, lowest precedence first):")
            )?;
        }
        text.push_str(&checks_table(&directories, color));
        writeln!(text)?;
        if problems.is_empty() {
            writeln!(text, "{} none", title("problems:"))?;
        } else {
            writeln!(
                text,
                "{}",
                title(&format!("problems ({}):", problems.len()))
            )?;
            text.push_str(&checks_table(&problems, color));
        }
        writeln!(text)?;
        match &global.config_file {
            Some(path) => writeln!(text, "{} {}", title("config file:"), path.display())?,
            None => writeln!(
                text,
                "{} none (create .toolsmith/config.toml, or pass --config FILE; docs/config.md lists every key)",
                title("config file:")
            )?,
        }
        let rows: Vec<Vec<Cell>> = settings
            .iter()
            .map(|setting| {
                let value = match &setting.value {
                    serde_json::Value::String(text) => text.clone(),
                    serde_json::Value::Null => "none".to_owned(),
                    other => other.to_string(),
                };
                vec![
                    Cell::plain(setting.key),
                    Cell::plain(value),
                    Cell::painted(setting.origin.to_string(), Paint::Dim),
                ]
            })
            .collect();
        text.push_str(&output::table(
            "  ",
            &["KEY", "VALUE", "FROM"],
            &rows,
            color,
        ));
        writeln!(text)?;
        match (&cache_file, global.cache_disabled) {
            (Some(file), _) => writeln!(text, "{} {}", title("discovery cache:"), file.display())?,
            (None, true) => writeln!(text, "{} off", title("discovery cache:"))?,
            (None, false) => writeln!(
                text,
                "{} off (no HOME or XDG_CACHE_HOME)",
                title("discovery cache:")
            )?,
        }
        writeln!(text)?;
        match problem_count {
            0 => writeln!(text, "{}", Paint::Good.paint("no problems found", color)),
            1 => writeln!(text, "{}", Paint::Bad.paint("1 problem found", color)),
            n => writeln!(
                text,
                "{}",
                Paint::Bad.paint(&format!("{n} problems found"), color)
            ),
        }
    };
    write(&mut text).context("cannot format the report")?;
    output::write_text(&text)?;
    Ok(status(problem_count))
}

fn status(problem_count: usize) -> ExitStatus {
    if problem_count == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    }
}

fn origin_json(origin: Origin) -> serde_json::Value {
    match origin {
        Origin::Flag(flag) => json!({"kind": "flag", "name": flag}),
        Origin::Env(name) => json!({"kind": "env", "name": name}),
        Origin::File => json!({"kind": "file"}),
        Origin::Default => json!({"kind": "default"}),
    }
}

/// A checks table: name, status, detail, and the fix on a line of its own below.
fn checks_table(checks: &[Check], color: bool) -> String {
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
    let table = output::table("  ", &[], &rows, color);
    let mut text = String::new();
    for (line, check) in table.lines().zip(checks) {
        text.push_str(line);
        text.push('\n');
        if let Some(fix) = &check.fix {
            text.push_str(&format!("    {} {fix}\n", Paint::Warn.paint("fix:", color)));
        }
    }
    text
}

/// The executor's kernel probes: what the containment backend can rely on.
/// A missing feature has a fallback, so it is a warning with the fix, never a problem.
pub(crate) fn kernel_checks(executor: &Executor) -> Vec<Check> {
    executor
        .features()
        .checks()
        .into_iter()
        .map(|(name, probe)| Check {
            name: name.to_owned(),
            status: if probe.available {
                Status::Ok
            } else {
                Status::Warn
            },
            detail: probe.detail.clone(),
            fix: (!probe.available).then(|| feature_fix(name).to_owned()),
        })
        .collect()
}

/// What to do when a kernel feature is missing.
fn feature_fix(name: &str) -> &'static str {
    match name {
        "cgroup.kill" | "memory controller" | "pids controller" | "cpu accounting" => {
            "run toolsmith in a cgroup v2 subtree it may write to (e.g. `systemd-run --user --scope -p Delegate=yes toolsmith ...`) or as root; without it, memory and process limits fall back to rlimits and trees are found by other means"
        }
        "pid namespace" => {
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) or run as root"
        }
        "subreaper" => "needs Linux 3.4 or later (prctl PR_SET_CHILD_SUBREAPER)",
        "pidfd" => {
            "needs Linux 5.3 or later; without it, signals go through cgroup.kill or process groups only"
        }
        _ => "see docs/executor.md for what each backend needs",
    }
}

/// One line per tool directory: how many tools it provides, or why it provides none.
fn directory_checks(global: &GlobalSettings, catalog: &Catalog) -> Vec<Check> {
    global
        .layers
        .iter()
        .map(|layer_dir| {
            let dir = &layer_dir.dir;
            let layer = layer_dir.layer.as_str();
            // The default layers are optional; a directory someone named must exist.
            let named = global.explicit_dirs || layer == "config";
            if !dir.is_dir() {
                return Check {
                    name: layer.to_owned(),
                    status: if named { Status::Problem } else { Status::Info },
                    detail: format!("{} (missing)", dir.display()),
                    fix: Some(if named {
                        format!("create it (mkdir -p {}) or stop naming it", dir.display())
                    } else {
                        format!("create it to add tools: mkdir -p {}", dir.display())
                    }),
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
fn tool_count(catalog: &Catalog, dir: &Path) -> usize {
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
        ProblemError::BrokenLink { .. } => {
            format!("point the link at the tool (ln -sfn TARGET {path}) or remove it")
        }
        ProblemError::NotExecutable => format!("chmod +x {path}"),
        ProblemError::NonUtf8FileName | ProblemError::FileName { .. } => format!(
            "rename {path}: lower-case letters, digits and `_` (`-` is read as `_`), starting with a letter"
        ),
        ProblemError::Duplicate { .. } => "keep one of the two files, or rename one".to_owned(),
        _ => format!("`toolsmith validate {path}` runs every check and shows which one fails"),
    }
}

/// One sandbox mechanism and what the kernel says about it.
struct Support<'a> {
    mechanism: &'static str,
    purpose: &'static str,
    probe: &'a Probe,
    fix: &'static str,
}

impl Support<'_> {
    /// How to get the mechanism, when it is missing and not disabled on purpose.
    fn fix(&self) -> Option<String> {
        if self.probe.available {
            return None;
        }
        if self.probe.detail.contains(DISABLE_FEATURES_VAR) {
            return Some(format!("unset {DISABLE_FEATURES_VAR}"));
        }
        Some(self.fix.to_owned())
    }
}

/// The sandbox mechanisms as report lines: a missing one is a warning, since
/// the calls that need it fail closed (or run without it where the operator
/// chose `-if-possible`).
fn sandbox_checks(support: &[Support<'_>]) -> Vec<Check> {
    support
        .iter()
        .map(|support| Check {
            name: support.mechanism.to_owned(),
            status: if support.probe.available {
                Status::Ok
            } else {
                Status::Warn
            },
            detail: format!("{}: {}", support.purpose, support.probe.detail),
            fix: support.fix(),
        })
        .collect()
}

fn sandbox_support(features: &Features) -> [Support<'_>; 4] {
    [
        Support {
            mechanism: "network namespace",
            purpose: "network = deny",
            probe: &features.network_namespace,
            fix: "run toolsmith as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0); or set network = \"deny-if-possible\"",
        },
        Support {
            mechanism: "landlock",
            purpose: "filesystem = project | read-only",
            probe: &features.landlock,
            fix: "use Linux 5.13 or later with `landlock` in the lsm= boot parameter; or set filesystem = \"project-if-possible\" / \"read-only-if-possible\"",
        },
        Support {
            mechanism: "private /proc",
            purpose: "tools see no other process, toolsmith's environment included",
            probe: &features.private_proc,
            fix: "run toolsmith as root, or allow unprivileged user namespaces; without it toolsmith's own environment is still blanked at start (see `secrets`)",
        },
        Support {
            mechanism: "seccomp",
            purpose: "syscalls = filter (keyrings, bpf, mounts, namespaces, ptrace, modules, ... denied)",
            probe: &features.seccomp,
            fix: "use a kernel with CONFIG_SECCOMP_FILTER (Linux 3.17 or later) on x86_64 or aarch64, and no outer sandbox that forbids seccomp(2); or set syscalls = \"filter-if-possible\"",
        },
    ]
}

/// Who tools run as, and with which capabilities.
fn privileges_line(global: &GlobalSettings) -> String {
    let uid = toolsmith_executor::effective_uid();
    match (uid, global.sandbox.user) {
        (0, Some(user)) => format!(
            "tools run as {user} ([sandbox] user), no supplementary group, no capability, bounding set empty"
        ),
        (0, None) => "tools run as root (uid 0) with no capability and an empty bounding set; root-owned files stay writable to them: set [sandbox] user to run them as another uid".to_owned(),
        (uid, _) => format!(
            "tools run as uid {uid} (toolsmith's), with no capability, in their user namespace too"
        ),
    }
}

/// How toolsmith's own memory is kept from tools.
fn memory_line() -> String {
    let dumpable = match crate::NOT_DUMPABLE.get() {
        Some(Ok(())) => "not dumpable (no tool can open /proc/<toolsmith>/mem)".to_owned(),
        Some(Err(error)) => format!("dumpable: {error}"),
        None => "dumpable (embedded use)".to_owned(),
    };
    match crate::ENVIRON_DROPPED.get() {
        Some(count) => format!(
            "{dumpable}; {count} variables no tool receives were dropped from its environment"
        ),
        None => dumpable,
    }
}

/// Which protection keeps toolsmith's environment from tools.
struct Secrets {
    protection: &'static str,
    detail: String,
}

fn secrets_protection(features: &Features) -> Secrets {
    let sealed = crate::ENVIRON_SEALED.get();
    let seal_detail = match sealed {
        Some(Ok(())) => "toolsmith's initial environment was blanked at start".to_owned(),
        Some(Err(error)) => {
            format!("toolsmith's initial environment could not be blanked: {error}")
        }
        None => "toolsmith's initial environment was not blanked (embedded use)".to_owned(),
    };
    match (
        features.private_proc.available,
        matches!(sealed, Some(Ok(()))),
    ) {
        (true, _) => Secrets {
            protection: "private-proc",
            detail: format!("every call has its own PID namespace and /proc; also {seal_detail}"),
        },
        (false, true) => Secrets {
            protection: "blanked-environ",
            detail: format!(
                "tools see other processes, but {seal_detail}; other processes of the same user stay readable"
            ),
        },
        (false, false) => Secrets {
            protection: "none",
            detail: format!(
                "{seal_detail}; a tool can read /proc/<pid>/environ of toolsmith: keep secrets out of its environment"
            ),
        },
    }
}
