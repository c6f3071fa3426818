//! `toolsmith doctor`: what the kernel allows, the tool directories and the problems found in them, the interpreters the tools need, and the effective config, each with a fix where one exists.
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

/// Runs every check and prints the report; status 1 when a problem was found.
pub(crate) async fn doctor(
    args: &DoctorArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let config = global.run_config(&global.cwd, None);
    let bar = DiscoveryBar::new();
    let catalog = global
        .discover(executor, &config, &global.policy(None), &|progress| {
            bar.update(progress);
        })
        .await;
    bar.finish();
    let kernel = kernel_checks(executor);
    let support = sandbox_support(executor.features());
    let sandbox = sandbox_checks(&support);
    let secrets = secrets_protection(executor.features());
    let probes = toolsmith_registry::probe_sandbox_report(executor.features());
    let privileges = privileges_line(global);
    let memory = memory_line();
    let directories = directory_checks(global, &catalog);
    let problems = problem_checks(&catalog);
    let tools_path = config
        .env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_os_str());
    let interpreters = interpreter_checks(&catalog, tools_path);
    let trust = trust_checks(global);
    let settings = global.effective();
    let problem_count = kernel
        .iter()
        .chain(&sandbox)
        .chain(&directories)
        .chain(&problems)
        .chain(&interpreters)
        .chain(&trust)
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
            "interpreters": checks_json(&interpreters),
            "config_file": global.config_file,
            "user_config_file": global.user_config_file,
            "trust": {
                "project_may_loosen": global.trust.project_may_loosen,
                "dirs": global.trust.units.iter().map(|unit| json!({
                    "path": unit.dir,
                    "status": unit.verdict.as_str(),
                    "skipped": unit.skipped,
                })).collect::<Vec<_>>(),
                "checks": checks_json(&trust),
            },
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
                "probes": {
                    "network": if probes.network_denied { "deny" } else { "allow" },
                    "filesystem": if probes.read_only { "read-only" } else { "full" },
                    "pid_namespace": probes.private_pids,
                    "not_enforced": probes.not_enforced,
                },
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
        writeln!(
            text,
            "  probes: network {}, filesystem {}, {} PID namespace, whatever the settings above{}",
            if probes.network_denied {
                "deny"
            } else {
                "allow"
            },
            if probes.read_only {
                "read-only"
            } else {
                "full"
            },
            if probes.private_pids { "own" } else { "shared" },
            if probes.not_enforced.is_empty() {
                String::new()
            } else {
                format!(" (not enforced: {})", probes.not_enforced.join("; "))
            }
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
        if interpreters.is_empty() {
            writeln!(text, "{} none needed", title("interpreters:"))?;
        } else {
            writeln!(text, "{}", title("interpreters (what the tools run with):"))?;
            text.push_str(&checks_table(&interpreters, color));
        }
        writeln!(text)?;
        if !trust.is_empty() {
            writeln!(text, "{}", title("project trust:"))?;
            text.push_str(&checks_table(&trust, color));
            writeln!(text)?;
        }
        match &global.user_config_file {
            Some(path) => writeln!(text, "{} {}", title("user config:"), path.display())?,
            None => writeln!(
                text,
                "{} none ($TOOLSMITH_HOME/config.toml, default ~/.config/toolsmith/config.toml; docs/config.md lists every key)",
                title("user config:")
            )?,
        }
        match &global.config_file {
            Some(path) => writeln!(text, "{} {}", title("config file:"), path.display())?,
            None => writeln!(
                text,
                "{} none (a trusted project's .toolsmith/config.toml, or --config FILE)",
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

/// The project's trust: each directory considered (trusted, or skipped with the command that
/// trusts it), then each value of the project config that would have loosened the user's
/// settings (a problem: the project asked for something it did not get).
fn trust_checks(global: &GlobalSettings) -> Vec<Check> {
    let report = &global.trust;
    let mut checks = Vec::new();
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

fn origin_json(origin: Origin) -> serde_json::Value {
    match origin {
        Origin::Flag(flag) => json!({"kind": "flag", "name": flag}),
        Origin::Env(name) => json!({"kind": "env", "name": name}),
        Origin::File => json!({"kind": "file"}),
        Origin::UserFile => json!({"kind": "user_file"}),
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

fn sandbox_support(features: &Features) -> [Support<'_>; 6] {
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
            mechanism: "mount namespace",
            purpose: "read-only /sys and cgroups, a minimal /dev, nodev mounts, and under project | read-only read-only mounts, protected paths and a capped tmpfs TMPDIR",
            probe: &features.private_mounts,
            fix: "use Linux 5.12 or later (mount_setattr) and run toolsmith as root or allow unprivileged user namespaces; as root, filesystem = project | read-only fail closed without it (set \"project-if-possible\" / \"read-only-if-possible\" to run with Landlock alone)",
        },
        Support {
            mechanism: "ipc and uts namespaces",
            purpose: "SysV objects and POSIX queues die with each call, the host's stay out of sight",
            probe: &features.ipc_namespace,
            fix: "run toolsmith as root, or allow unprivileged user namespaces",
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

/// What runs a tool: a program looked up in the tools' `PATH` (`#!/usr/bin/env NAME`, a
/// manifest's shell), or an absolute path (`#!/usr/bin/python3`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Interpreter {
    /// Found by name in `PATH`, as `env` finds it.
    Name(String),
    /// A manifest's shell: found in `PATH`, then /bin and /usr/bin, as a call finds it.
    Shell(&'static str),
    /// An absolute path from a `#!` line.
    Path(std::path::PathBuf),
}

impl Interpreter {
    fn label(&self) -> String {
        match self {
            Interpreter::Name(name) => name.clone(),
            Interpreter::Shell(name) => (*name).to_owned(),
            Interpreter::Path(path) => path.display().to_string(),
        }
    }
}

/// The interpreter a `#!` line names: `#!/usr/bin/env [-S] [VAR=value]... NAME ...` names
/// NAME, any other `#!PATH ...` names PATH. A file without one (a binary) needs none.
fn shebang_interpreter(path: &Path) -> Option<Interpreter> {
    use std::io::Read as _;
    let mut head = [0_u8; 256];
    let mut file = std::fs::File::open(path).ok()?;
    let n_read = file.read(&mut head).ok()?;
    let line = head[..n_read].strip_prefix(b"#!")?;
    let line = line.split(|byte| *byte == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let program = words.next()?;
    if Path::new(program).file_name() == Some(std::ffi::OsStr::new("env")) {
        let name = words.find(|word| !word.starts_with('-') && !word.contains('='))?;
        return Some(Interpreter::Name(name.to_owned()));
    }
    Some(Interpreter::Path(std::path::PathBuf::from(program)))
}

/// The interpreters the discovered tools need, tools that failed to load included (a
/// missing interpreter is a common reason), with the tool names that need each.
fn needed_interpreters(catalog: &Catalog) -> Vec<(Interpreter, Vec<String>)> {
    // By label: `bash` named by a `#!` line and by a manifest is one line, looked up as
    // `env` looks it up (the stricter of the two).
    let mut needed: std::collections::BTreeMap<String, (Interpreter, Vec<String>)> =
        Default::default();
    let mut add = |interpreter: Interpreter, user: String| {
        let entry = needed
            .entry(interpreter.label())
            .or_insert_with(|| (interpreter.clone(), Vec::new()));
        if matches!(entry.0, Interpreter::Shell(_)) && matches!(interpreter, Interpreter::Name(_)) {
            entry.0 = interpreter;
        }
        entry.1.push(user);
    };
    let tools = catalog
        .tools()
        .iter()
        .chain(catalog.shadowed().iter().map(|shadowed| &shadowed.tool));
    for tool in tools {
        let interpreter = match tool.kind() {
            // A manifest that names no shell runs with bash, else sh: sh is what it needs.
            toolsmith_registry::Format::Manifest => {
                Some(Interpreter::Shell(tool.manifest_shell().unwrap_or("sh")))
            }
            _ => shebang_interpreter(tool.path()),
        };
        if let Some(interpreter) = interpreter {
            add(interpreter, tool.name().as_str().to_owned());
        }
    }
    for problem in catalog.problems() {
        let is_manifest = problem.path.extension().is_some_and(|ext| ext == "md");
        if is_manifest || !problem.path.is_file() {
            continue;
        }
        if let Some(interpreter) = shebang_interpreter(&problem.path) {
            add(interpreter, problem.path.display().to_string());
        }
    }
    needed.into_values().collect()
}

/// Where `interpreter` is found with the tools' `PATH` (`env` searches /bin:/usr/bin when
/// there is none; a manifest's shell is also looked for there).
fn find_interpreter(
    interpreter: &Interpreter,
    tools_path: Option<&std::ffi::OsStr>,
) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path)
            .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
    };
    match interpreter {
        Interpreter::Path(path) => executable(path).then(|| path.clone()),
        Interpreter::Name(name) => {
            let search = tools_path.unwrap_or(std::ffi::OsStr::new("/bin:/usr/bin"));
            std::env::split_paths(search)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(name))
                .find(|candidate| executable(candidate))
        }
        Interpreter::Shell(name) => std::env::split_paths(tools_path.unwrap_or_default())
            .filter(|dir| dir.is_absolute())
            .chain([
                std::path::PathBuf::from("/bin"),
                std::path::PathBuf::from("/usr/bin"),
            ])
            .map(|dir| dir.join(name))
            .find(|candidate| executable(candidate)),
    }
}

/// How to install an interpreter, by its name.
fn interpreter_fix(interpreter: &Interpreter) -> String {
    let name = match interpreter {
        Interpreter::Name(name) => name.as_str(),
        Interpreter::Shell(name) => name,
        Interpreter::Path(path) => path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default(),
    };
    let package = match name {
        "python3" | "python" => Some("python3"),
        "bash" => Some("bash"),
        "sh" | "dash" => Some("dash"),
        "node" | "nodejs" => Some("nodejs"),
        "perl" => Some("perl"),
        "ruby" => Some("ruby"),
        "zsh" => Some("zsh"),
        "jq" => Some("jq"),
        _ => None,
    };
    let install = match package {
        Some(package) => format!("install it (e.g. `apt-get install {package}`)"),
        None => format!("install `{name}`"),
    };
    match interpreter {
        Interpreter::Name(_) | Interpreter::Shell(_) => {
            format!("{install} into a directory of the PATH tools get")
        }
        Interpreter::Path(path) => format!(
            "{install} so that {} exists, or change the tools' `#!` line to `#!/usr/bin/env {name}`",
            path.display()
        ),
    }
}

/// One line per interpreter the discovered tools need: where it is, or that it is missing
/// (a problem: those tools cannot run), with the fix.
pub(crate) fn interpreter_checks(
    catalog: &Catalog,
    tools_path: Option<&std::ffi::OsStr>,
) -> Vec<Check> {
    needed_interpreters(catalog)
        .into_iter()
        .map(|(interpreter, tools)| {
            let needed_by = format!(
                "{} {}: {}",
                tools.len(),
                if tools.len() == 1 { "tool" } else { "tools" },
                tools.join(", ")
            );
            match find_interpreter(&interpreter, tools_path) {
                // Where it was found is left out: it differs between machines, and
                // `command -v` tells it.
                Some(_) => Check {
                    name: interpreter.label(),
                    status: Status::Ok,
                    detail: format!("found ({needed_by})"),
                    fix: None,
                },
                None => Check {
                    name: interpreter.label(),
                    status: Status::Problem,
                    detail: match interpreter {
                        Interpreter::Name(_) | Interpreter::Shell(_) => {
                            format!("missing from PATH ({needed_by})")
                        }
                        Interpreter::Path(_) => format!("missing ({needed_by})"),
                    },
                    fix: Some(interpreter_fix(&interpreter)),
                },
            }
        })
        .collect()
}
