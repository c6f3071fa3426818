//! The report of `toolsmith doctor`, as JSON (`--json`) and as text.

use std::fmt::Write as _;

use serde_json::json;
use toolsmith_executor::BackendChoice;

use crate::commands::doctor::{Check, Report, checks_table, origin_json, tool_count};
use crate::output::{self, Cell, Paint};

/// Checks as JSON objects.
fn checks_json(checks: &[Check]) -> Vec<serde_json::Value> {
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
}

/// The report as one JSON document.
pub(super) fn report_json(report: &Report<'_>) -> serde_json::Value {
    let Report {
        global,
        executor,
        catalog,
        kernel,
        support,
        sandbox: _,
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
    } = report;
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
                "tools": tool_count(catalog, &layer_dir.dir),
            })
        })
        .collect();
    json!({
            "ok": *problem_count == 0,
            "backend": executor.backend().to_string(),
            "features": features,
            "kernel": checks_json(kernel),
            "tool_dirs": tool_dirs,
            "directories": checks_json(directories),
            "problems": checks_json(problems),
            "interpreters": checks_json(interpreters),
            "secrets": checks_json(defined_secrets),
            "config_file": global.config_file,
            "user_config_file": global.user_config_file,
            "trust": {
                "project_may_loosen": global.trust.project_may_loosen,
                "dirs": global.trust.units.iter().map(|unit| json!({
                    "path": unit.dir,
                    "status": unit.verdict.as_str(),
                    "skipped": unit.skipped,
                })).collect::<Vec<_>>(),
                "checks": checks_json(trust),
            },
            "settings": settings_json(settings),
            "cache": {
                "enabled": cache_file.is_some(),
                "file": cache_file,
            },
            "sandbox": {
                "profile": global.sandbox.profile.as_str(),
                "network": global.sandbox.network.to_json(),
                "generated_network": global.sandbox.generated_network.to_json(),
                "filesystem": global.sandbox.filesystem.to_json(),
                "project_dir": global.project_dir,
                "project_source": global.project_source.as_str(),
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
                "read_masks": read_masks_json(global),
                "syscalls": global.sandbox.syscalls.as_str(),
                "user": global.sandbox.user.map(|user| user.to_string()),
                "privileges": privileges,
                "memory": memory,
            },
    })
}

/// Each setting of `doctor --json`'s `settings`, with its origin.
fn settings_json(settings: &[crate::settings::Effective]) -> Vec<serde_json::Value> {
    settings
        .iter()
        .map(|setting| {
            json!({
                "key": setting.key,
                "value": setting.value,
                "origin": origin_json(setting.origin),
            })
        })
        .collect()
}

/// The report as text, styled: stdout drops the styles unless it is coloured.
pub(super) fn report_text(report: &Report<'_>) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    machine_text(report, &mut text)?;
    tools_text(report, &mut text)?;
    config_text(report, &mut text)?;
    Ok(text)
}

/// The read masks of every call (docs/security.md, "Read masks"): the paths hidden now.
fn read_masks_json(global: &crate::GlobalSettings) -> serde_json::Value {
    json!({
        "credentials": !global.read_masks.credentials.is_empty(),
        "hidden": global
            .read_masks
            .for_probes()
            .into_iter()
            .filter(|path| path.symlink_metadata().is_ok())
            .collect::<Vec<_>>(),
        "hide": global.read_masks.hide,
        "reveal": global.read_masks.reveal,
    })
}

/// The backend, the kernel's features, the sandbox and toolsmith's own protection.
fn machine_text(report: &Report<'_>, text: &mut String) -> std::fmt::Result {
    let Report {
        global,
        executor,
        kernel,
        sandbox,
        secrets,
        probes,
        privileges,
        memory,
        ..
    } = report;
    let title = |text: &str| Paint::Header.paint(text);
    let chosen = match global.backend {
        BackendChoice::Auto => "auto: the strongest this kernel allows",
        BackendChoice::Only(_) => "pinned by configuration",
    };
    writeln!(
        text,
        "{} {} ({chosen})",
        title("backend:"),
        Paint::Name.paint(&executor.backend().to_string())
    )?;
    writeln!(text)?;
    writeln!(text, "{}", title("kernel:"))?;
    text.push_str(&checks_table(kernel));
    writeln!(text)?;
    writeln!(
        text,
        "{} profile = {}, network = {}, filesystem = {}, generated tools' network = {} (project: {}, {})",
        title("sandbox:"),
        global.sandbox.profile,
        global.sandbox.network,
        global.sandbox.filesystem,
        global.sandbox.generated_network,
        global.project_dir.display(),
        global.project_source.describe()
    )?;
    text.push_str(&checks_table(sandbox));
    writeln!(
        text,
        "  secrets: {} ({})",
        Paint::Name.paint(secrets.protection),
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
    writeln!(
        text,
        "  read masks: {} hidden from every tool under every profile (`read_reveal` shows a path; docs/security.md, \"Read masks\")",
        if global.read_masks.credentials.is_empty() {
            "toolsmith's own state (profile compat: credentials readable)"
        } else {
            "every home's credentials and toolsmith's own state"
        }
    )?;
    writeln!(text, "  privileges: {privileges}")?;
    writeln!(text, "  toolsmith's memory: {memory}")?;
    writeln!(text)?;
    Ok(())
}

/// The tool directories, the problems found in them, the interpreters and project trust.
fn tools_text(report: &Report<'_>, text: &mut String) -> std::fmt::Result {
    let Report {
        global,
        directories,
        problems,
        interpreters,
        trust,
        defined_secrets,
        ..
    } = report;
    let title = |text: &str| Paint::Header.paint(text);
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
    text.push_str(&checks_table(directories));
    writeln!(text)?;
    if problems.is_empty() {
        writeln!(text, "{} none", title("problems:"))?;
    } else {
        writeln!(
            text,
            "{}",
            title(&format!("problems ({}):", problems.len()))
        )?;
        text.push_str(&checks_table(problems));
    }
    writeln!(text)?;
    if interpreters.is_empty() {
        writeln!(text, "{} none needed", title("interpreters:"))?;
    } else {
        writeln!(text, "{}", title("interpreters (what the tools run with):"))?;
        text.push_str(&checks_table(interpreters));
    }
    writeln!(text)?;
    if !trust.is_empty() {
        writeln!(text, "{}", title("project trust:"))?;
        text.push_str(&checks_table(trust));
        writeln!(text)?;
    }
    if !defined_secrets.is_empty() {
        writeln!(
            text,
            "{}",
            title("secrets (names and sources, never values):")
        )?;
        text.push_str(&checks_table(defined_secrets));
        writeln!(text)?;
    }
    Ok(())
}

/// The config files, every effective setting, the discovery cache and the verdict.
fn config_text(report: &Report<'_>, text: &mut String) -> std::fmt::Result {
    let Report {
        global,
        settings,
        problem_count,
        cache_file,
        ..
    } = report;
    let title = |text: &str| Paint::Header.paint(text);
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
    text.push_str(&output::table("  ", &["KEY", "VALUE", "FROM"], &rows));
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
        0 => writeln!(text, "{}", Paint::Good.paint("no problems found")),
        1 => writeln!(text, "{}", Paint::Bad.paint("1 problem found")),
        n => writeln!(text, "{}", Paint::Bad.paint(&format!("{n} problems found"))),
    }
}
