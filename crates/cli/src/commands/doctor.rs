//! `toolsmith doctor`: which containment backend is in use, what the kernel allows, and where settings and tools come from.

use std::fmt::Write as _;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;

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
            .tool_dirs
            .iter()
            .map(|dir| json!({"path": dir, "exists": dir.is_dir()}))
            .collect();
        output::write_json(&json!({
            "backend": executor.backend().to_string(),
            "features": features,
            "config_file": global.config_file,
            "tool_dirs": tool_dirs,
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
        writeln!(text, "tool dirs:")?;
        if global.tool_dirs.is_empty() {
            writeln!(text, "  none (no default tool directory exists)")?;
        }
        for dir in &global.tool_dirs {
            let state = if dir.is_dir() { "" } else { " (missing)" };
            writeln!(text, "  {}{state}", dir.display())?;
        }
        Ok(())
    };
    write(&mut text).context("cannot format the report")?;
    output::write_text(&text)?;
    Ok(ExitStatus::Success)
}
