//! `toolsmith doctor`: which containment backend is in use, what the kernel allows, and where settings and tools come from.

use std::fmt::Write as _;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
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
        Ok(())
    };
    write(&mut text).context("cannot format the report")?;
    output::write_text(&text)?;
    Ok(ExitStatus::Success)
}
