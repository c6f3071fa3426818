//! `toolsmith doctor`: which containment backend is in use, what the kernel allows (sandbox mechanisms and secrets protection included), and where settings and tools come from.

use std::fmt::Write as _;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::{DISABLE_FEATURES_VAR, Executor, Features, Probe};
use toolsmith_registry::CACHE_FILE;

use crate::args::DoctorArgs;
use crate::exit::ExitStatus;
use crate::output;
use crate::settings::GlobalSettings;

/// Prints the report.
pub(crate) fn doctor(
    args: &DoctorArgs,
    global: &GlobalSettings,
    executor: &Executor,
) -> anyhow::Result<ExitStatus> {
    let checks = executor.features().checks();
    let sandbox = sandbox_support(executor.features());
    let secrets = secrets_protection(executor.features());
    if args.json {
        let features: Vec<serde_json::Value> = checks
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
                })
            })
            .collect();
        output::write_json(&json!({
            "backend": executor.backend().to_string(),
            "features": features,
            "config_file": global.config_file,
            "tool_dirs": tool_dirs,
            "cache": {
                "enabled": global.cache_dir.is_some(),
                "file": global.cache_dir.as_ref().map(|dir| dir.join(CACHE_FILE)),
            },
            "sandbox": {
                "network": global.sandbox.network.as_str(),
                "filesystem": global.sandbox.filesystem.as_str(),
                "project_dir": global.project_dir,
                "support": sandbox.iter().map(|support| json!({
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
            },
        }))?;
        return Ok(ExitStatus::Success);
    }
    let mut text = String::new();
    let write = |text: &mut String| -> std::fmt::Result {
        writeln!(text, "backend: {}", executor.backend())?;
        writeln!(text, "features:")?;
        let width = checks.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        for (name, probe) in &checks {
            let mark = if probe.available { "yes" } else { "no " };
            writeln!(text, "  {name:width$}  {mark}  {}", probe.detail)?;
        }
        match &global.config_file {
            Some(path) => writeln!(text, "config file: {}", path.display())?,
            None => writeln!(text, "config file: none")?,
        }
        if global.explicit_dirs {
            writeln!(text, "tool dirs (--tools-dir, lowest precedence first):")?;
        } else {
            writeln!(text, "tool dirs (layers, lowest precedence first):")?;
        }
        let width = global
            .layers
            .iter()
            .map(|layer_dir| layer_dir.layer.as_str().len())
            .max()
            .unwrap_or(0);
        for layer_dir in &global.layers {
            let state = if layer_dir.dir.is_dir() {
                ""
            } else {
                " (missing)"
            };
            writeln!(
                text,
                "  {:width$}  {}{state}",
                layer_dir.layer.as_str(),
                layer_dir.dir.display()
            )?;
        }
        match (&global.cache_dir, global.cache_disabled) {
            (Some(dir), _) => {
                writeln!(text, "discovery cache: {}", dir.join(CACHE_FILE).display())?
            }
            (None, true) => writeln!(text, "discovery cache: off")?,
            (None, false) => writeln!(text, "discovery cache: off (no HOME or XDG_CACHE_HOME)")?,
        }
        writeln!(
            text,
            "sandbox: network = {}, filesystem = {} (project: {})",
            global.sandbox.network,
            global.sandbox.filesystem,
            global.project_dir.display()
        )?;
        let width = sandbox
            .iter()
            .map(|support| support.mechanism.len())
            .max()
            .unwrap_or(0);
        for support in &sandbox {
            let mark = if support.probe.available {
                "yes"
            } else {
                "no "
            };
            writeln!(
                text,
                "  {:width$}  {mark}  {}: {}",
                support.mechanism, support.purpose, support.probe.detail
            )?;
            if let Some(fix) = support.fix() {
                writeln!(text, "  {:width$}       fix: {fix}", "")?;
            }
        }
        writeln!(text, "secrets: {} ({})", secrets.protection, secrets.detail)?;
        Ok(())
    };
    write(&mut text).context("cannot format the report")?;
    output::write_text(&text)?;
    Ok(ExitStatus::Success)
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

fn sandbox_support(features: &Features) -> [Support<'_>; 3] {
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
    ]
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
