//! `toolsmith list`: discover every tool and print those policy admits, grouped by directory; `--all` adds the rest.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
use toolsmith_registry::{
    AuditLog, Catalog, DefinitionChange, Denial, DeniedTool, Policy, RunConfig, SecretName, Tool,
};

use crate::args::ListArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::output::{self, Cell, Paint};
use crate::progress::DiscoveryBar;
use crate::settings::GlobalSettings;

/// Lists the tools. Problems are part of the listing, so the status is success
/// even when some files failed to load.
pub(crate) async fn list(
    args: &ListArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let config = global.run_config(&global.cwd, None);
    let policy = global.policy(args.profile);
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        config.clone(),
        policy.clone(),
    );
    let bar = DiscoveryBar::new();
    let catalog = discover::discover(global, &toolsmith, &|progress| bar.update(progress)).await;
    bar.finish();
    let audit = match global.audit_path.as_deref() {
        Some(path) => Some(AuditLog::open(path)?),
        None => None,
    };
    let changes =
        discover::observe_definitions(&mut discover::definitions(global), &catalog, audit.as_ref());
    let listing = Listing::new(&catalog, &policy, changes);
    if args.json {
        output::write_json(&listing.json(args.all, &config))?;
        return Ok(ExitStatus::Success);
    }
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
    if !args.all {
        // Whatever the short listing leaves out is counted, so that nothing is silently missing.
        let mut hidden = Vec::new();
        let mut count = |n: usize, one: &str, many: &str| match n {
            0 => {}
            1 => hidden.push(format!("1 {one}")),
            n => hidden.push(format!("{n} {many}")),
        };
        count(
            listing.denied.len() + catalog.denied().len(),
            "tool denied by policy",
            "tools denied by policy",
        );
        count(catalog.shadowed().len(), "tool shadowed", "tools shadowed");
        count(
            catalog.problems().len(),
            "file that could not be loaded",
            "files that could not be loaded",
        );
        if !hidden.is_empty() {
            tracing::warn!(
                "not listed: {}; `toolsmith list --all` shows them",
                hidden.join(", ")
            );
        }
    }
    let text = listing
        .text(&global.tool_dirs(), args.all)
        .context("cannot format the listing")?;
    output::write_text(&text)?;
    Ok(ExitStatus::Success)
}

/// The catalog split by policy.
struct Listing<'a> {
    catalog: &'a Catalog,
    admitted: Vec<&'a Tool>,
    denied: Vec<(&'a Tool, Denial)>,
    /// The tools whose definition changed since the last listing (pinned definitions).
    changes: Vec<DefinitionChange>,
}

impl<'a> Listing<'a> {
    fn new(catalog: &'a Catalog, policy: &Policy, changes: Vec<DefinitionChange>) -> Listing<'a> {
        let mut admitted = Vec::new();
        let mut denied = Vec::new();
        for tool in catalog.tools() {
            match policy.check(tool) {
                Ok(()) => admitted.push(tool),
                Err(denial) => denied.push((tool, denial)),
            }
        }
        Listing {
            catalog,
            admitted,
            denied,
            changes,
        }
    }

    /// The change of `tool`'s definition since the last listing, if it changed.
    fn change(&self, tool: &Tool) -> Option<&DefinitionChange> {
        self.changes
            .iter()
            .find(|change| &change.name == tool.name())
    }

    /// The keys of the first `list --json` (`tools`, `problems`, `shadowed`)
    /// always; `denied` with `--all`.
    fn json(&self, all: bool, config: &RunConfig) -> serde_json::Value {
        let tools: Vec<serde_json::Value> = self
            .admitted
            .iter()
            .map(|tool| {
                let mut entry = tool_json(tool, config);
                if let (Some(change), Some(object)) = (self.change(tool), entry.as_object_mut()) {
                    object.insert(
                        "definition_changed".to_owned(),
                        json!({"old_sha256": change.old_sha256, "new_sha256": change.new_sha256}),
                    );
                }
                entry
            })
            .collect();
        let problems: Vec<serde_json::Value> = self
            .catalog
            .problems()
            .iter()
            .map(|problem| json!({"path": problem.path, "error": problem.message()}))
            .collect();
        let shadowed: Vec<serde_json::Value> = self
            .catalog
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
        let mut listing = json!({"tools": tools, "problems": problems, "shadowed": shadowed});
        if all {
            let denied: Vec<serde_json::Value> = self
                .denied
                .iter()
                .map(|(tool, denial)| {
                    let mut entry = tool_json(tool, config);
                    if let Some(object) = entry.as_object_mut() {
                        object.insert("reason".to_owned(), json!(denial.to_string()));
                        object.insert("reason_code".to_owned(), json!(denial.code()));
                    }
                    entry
                })
                .chain(self.catalog.denied().iter().map(unprobed_json))
                .collect();
            listing["denied"] = json!(denied);
        }
        listing
    }

    /// The admitted tools grouped by directory (in precedence order, lowest
    /// first) and sorted by name; `--all` adds the other sections.
    fn text(&self, tool_dirs: &[PathBuf], all: bool) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        let mut sources: Vec<&Path> = tool_dirs.iter().map(PathBuf::as_path).collect();
        for tool in &self.admitted {
            if !sources.contains(&tool.source()) {
                sources.push(tool.source());
            }
        }
        let rows: Vec<(&Path, Vec<Cell>)> = self
            .admitted
            .iter()
            .map(|tool| {
                (
                    tool.source(),
                    vec![
                        Cell::painted(
                            match self.change(tool) {
                                // Pinned definitions: what the agent sees changed since the
                                // last listing.
                                Some(_) => format!("{} (changed)", tool.name()),
                                None => tool.name().to_string(),
                            },
                            Paint::Name,
                        ),
                        Cell::plain(tool.kind().to_string()),
                        Cell::plain(first_line(tool.description())),
                    ],
                )
            })
            .collect();
        // One table for every group, so that the columns line up across directories.
        let all_rows: Vec<Vec<Cell>> = rows.iter().map(|(_, row)| row.clone()).collect();
        let table = output::table("  ", &["NAME", "KIND", "DESCRIPTION"], &all_rows);
        let mut lines = table.lines();
        let header = lines.next().unwrap_or_default();
        let lines: Vec<&str> = lines.collect();
        for source in sources {
            let group: Vec<&str> = rows
                .iter()
                .zip(&lines)
                .filter(|((row_source, _), _)| *row_source == source)
                .map(|(_, line)| *line)
                .collect();
            if group.is_empty() {
                continue;
            }
            separate(&mut text);
            writeln!(
                text,
                "{}",
                Paint::Header.paint(&format!("{}:", source.display()))
            )?;
            writeln!(text, "{header}")?;
            for line in group {
                writeln!(text, "{line}")?;
            }
        }
        if !all {
            return Ok(text);
        }
        if !self.denied.is_empty() || !self.catalog.denied().is_empty() {
            separate(&mut text);
            writeln!(text, "{}", Paint::Header.paint("denied:"))?;
            for (tool, denial) in &self.denied {
                writeln!(
                    text,
                    "  {} at {}: {denial}",
                    tool.name(),
                    tool.path().display()
                )?;
            }
            for denied in self.catalog.denied() {
                writeln!(
                    text,
                    "  {} at {}: {} (not run: no description)",
                    denied.name,
                    denied.path.display(),
                    denied.denial
                )?;
            }
        }
        if !self.catalog.shadowed().is_empty() {
            separate(&mut text);
            writeln!(text, "{}", Paint::Header.paint("shadowed:"))?;
            for shadowed in self.catalog.shadowed() {
                writeln!(
                    text,
                    "  {} at {} (by {})",
                    shadowed.tool.name(),
                    shadowed.tool.path().display(),
                    shadowed.by.display()
                )?;
            }
        }
        if !self.catalog.problems().is_empty() {
            separate(&mut text);
            writeln!(text, "{}", Paint::Header.paint("problems:"))?;
            for problem in self.catalog.problems() {
                writeln!(
                    text,
                    "  {}: {}",
                    Paint::Bad.paint(&problem.path.display().to_string()),
                    problem.message()
                )?;
            }
        }
        Ok(text)
    }
}

/// A file policy refused, which discovery never ran: what its path tells, and why.
fn unprobed_json(denied: &DeniedTool) -> serde_json::Value {
    json!({
        "name": denied.name.as_str(),
        "exposed_name": denied.name.exposed(),
        "path": denied.path,
        "source": denied.source,
        "layer": denied.layer.as_str(),
        "probed": false,
        "reason": denied.denial.to_string(),
        "reason_code": denied.denial.code(),
    })
}

/// A tool's entry; `sandbox` holds what it declares and what a call gets on each axis (the
/// operator's grant narrowed by the declaration), and what would be refused.
fn tool_json(tool: &Tool, config: &RunConfig) -> serde_json::Value {
    let call = config.call_config(tool);
    let mut entry = json!({
        "name": tool.name().as_str(),
        "exposed_name": tool.name().exposed(),
        "description": tool.description(),
        "path": tool.path(),
        "source": tool.source(),
        "kind": tool.kind().as_str(),
        "layer": tool.layer().as_str(),
        "input_schema": tool.input_schema().as_json(),
        "sandbox": {
            "declared": tool.sandbox().to_json(),
            "network": call.sandbox.network.to_json(),
            "filesystem": call.sandbox.filesystem.to_json(),
            "denied": call.denied,
        },
    });
    // Only tools that declare a result schema (ikigai's `returns`) carry it.
    if let (Some(output_schema), Some(object)) = (tool.output_schema(), entry.as_object_mut()) {
        object.insert("output_schema".to_owned(), output_schema.as_json().clone());
    }
    // Only tools granted or declaring a secret carry `secrets` (names, never values).
    let granted = config.granted_secrets(tool);
    let declared = &tool.sandbox().secrets;
    if let (false, Some(object)) = (
        granted.is_empty() && declared.is_empty(),
        entry.as_object_mut(),
    ) {
        let names = |names: &[SecretName]| -> Vec<String> {
            names.iter().map(|name| name.as_str().to_owned()).collect()
        };
        object.insert(
            "secrets".to_owned(),
            json!({"granted": names(granted), "declared": names(declared)}),
        );
    }
    entry
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
