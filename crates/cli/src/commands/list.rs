//! `toolsmith list`: discover every tool and print them with the problems found on the way.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
use toolsmith_registry::{Catalog, RunConfig};

use crate::args::ListArgs;
use crate::exit::ExitStatus;
use crate::output;
use crate::settings::GlobalSettings;

/// Lists the tools. Problems are part of the listing, so the status is success
/// even when some files failed to load.
pub(crate) async fn list(
    args: &ListArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let config = RunConfig {
        cwd: global.cwd.clone(),
        env: global.tool_env(),
        limits: global.limits.clone(),
        max_timeout: global.max_timeout,
    };
    let mut cache = global.discovery_cache();
    let catalog =
        toolsmith_registry::discover_layers(executor, &global.layers, &mut cache, &config).await;
    global.save_discovery_cache(&mut cache);
    if args.json {
        output::write_json(&catalog_json(&catalog))?;
    } else {
        if catalog.tools().is_empty() {
            let searched: Vec<String> = global
                .layers
                .iter()
                .filter(|layer_dir| layer_dir.dir.is_dir())
                .map(|layer_dir| layer_dir.dir.display().to_string())
                .collect();
            tracing::warn!(
                "no tools found (searched: {})",
                if searched.is_empty() {
                    "no tool directory exists".to_owned()
                } else {
                    searched.join(", ")
                }
            );
        }
        output::write_text(&catalog_text(&catalog).context("cannot format the listing")?)?;
    }
    Ok(ExitStatus::Success)
}

fn catalog_json(catalog: &Catalog) -> serde_json::Value {
    let tools: Vec<serde_json::Value> = catalog
        .tools()
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name().as_str(),
                "exposed_name": tool.name().exposed(),
                "description": tool.description(),
                "path": tool.path(),
                "source": tool.source(),
                "kind": tool.kind().as_str(),
                "layer": tool.layer().as_str(),
                "input_schema": tool.input_schema().as_json(),
            })
        })
        .collect();
    let problems: Vec<serde_json::Value> = catalog
        .problems()
        .iter()
        .map(|problem| json!({"path": problem.path, "error": problem.message()}))
        .collect();
    let shadowed: Vec<serde_json::Value> = catalog
        .shadowed()
        .iter()
        .map(|shadowed| {
            json!({
                "name": shadowed.tool.name().as_str(),
                "path": shadowed.tool.path(),
                "layer": shadowed.tool.layer().as_str(),
                "by": shadowed.by,
            })
        })
        .collect();
    json!({"tools": tools, "problems": problems, "shadowed": shadowed})
}

fn catalog_text(catalog: &Catalog) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    if !catalog.tools().is_empty() {
        let rows: Vec<[String; 3]> = catalog
            .tools()
            .iter()
            .map(|tool| {
                [
                    tool.name().to_string(),
                    first_line(tool.description()),
                    display(tool.path()),
                ]
            })
            .collect();
        let headers = ["NAME", "DESCRIPTION", "PATH"];
        let widths: Vec<usize> = (0..2)
            .map(|column| {
                rows.iter()
                    .map(|row| row[column].chars().count())
                    .chain([headers[column].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in std::iter::once(headers.map(str::to_owned)).chain(rows) {
            writeln!(
                text,
                "{:name_width$}  {:description_width$}  {}",
                row[0],
                row[1],
                row[2],
                name_width = widths[0],
                description_width = widths[1],
            )?;
        }
    }
    if !catalog.shadowed().is_empty() {
        separate(&mut text);
        writeln!(text, "shadowed:")?;
        for shadowed in catalog.shadowed() {
            writeln!(
                text,
                "  {} at {} (by {})",
                shadowed.tool.name(),
                display(shadowed.tool.path()),
                display(&shadowed.by)
            )?;
        }
    }
    if !catalog.problems().is_empty() {
        separate(&mut text);
        writeln!(text, "problems:")?;
        for problem in catalog.problems() {
            writeln!(text, "  {}: {}", display(&problem.path), problem.message())?;
        }
    }
    Ok(text)
}

/// Puts a blank line between sections, but none before the first.
fn separate(text: &mut String) {
    if !text.is_empty() {
        text.push('\n');
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_owned()
}

fn display(path: &Path) -> String {
    path.display().to_string()
}
