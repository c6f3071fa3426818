//! `toolsmith prepare [NAME]`: fetch the dependencies of tools started by a package runner
//! into their caches, once, then check that each loads offline; one line per tool, status 1
//! when any failed.

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
use toolsmith_registry::{Catalog, Preparation, PrepareStep, ToolName, error_chain, preparations};

use crate::args::PrepareArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::output::{self, Paint};
use crate::settings::GlobalSettings;

/// What the network of a preparation is, until toolsmith has per-host egress (issue 23).
const NETWORK_GRANTED: &str = "any";

/// One tool's preparation and how it went.
struct Prepared {
    preparation: Preparation,
    step: PrepareStep,
    /// `Err` with the reason: the step failed, or the tool still does not load offline.
    result: Result<(), String>,
}

pub(crate) async fn prepare(
    args: &PrepareArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let config = global.run_config(&global.cwd, None);
    let policy = global.policy(None);
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        config.clone(),
        policy.clone(),
    );
    let wanted = args
        .name
        .as_deref()
        .map(|text| {
            ToolName::from_exposed_or_plain(text)
                .with_context(|| format!("invalid tool name {text:?}"))
        })
        .transpose()?;
    let catalog = discover::discover(global, &toolsmith, &|_| {}).await;
    let mut pending = preparations(&catalog);
    if let Some(name) = &wanted {
        pending.retain(|preparation| &preparation.name == name);
        if pending.is_empty() {
            anyhow::ensure!(
                catalog.get(name).is_some(),
                "no tool named {name} in the tool directories (`toolsmith list --all` shows them)"
            );
            output::write_stderr(&format!(
                "{} {name} needs no preparation: it is not started by a package runner (uv run, npx)\n",
                Paint::Dim.paint("note:")
            ));
        }
    } else if pending.is_empty() {
        output::write_stderr(&format!(
            "{} no tool needs preparation: none is started by a package runner (uv run, npx)\n",
            Paint::Dim.paint("note:")
        ));
    }
    let mut done = Vec::new();
    for preparation in pending {
        let step = preparation.step(&config);
        output::write_stderr(&format!(
            "preparing {}: {} (network: {NETWORK_GRANTED} for this step; it needs {})\n",
            preparation.name, step.command, step.index
        ));
        let result = preparation
            .run(executor, &config)
            .await
            .map_err(|error| error_chain(&error));
        done.push(Prepared {
            preparation,
            step,
            result,
        });
    }
    if !done.is_empty() {
        // Discovery again, offline as always: a prepared tool must now load.
        let after = discover::discover(global, &toolsmith, &|_| {}).await;
        for prepared in &mut done {
            if prepared.result.is_ok() {
                prepared.result = loads(&after, &prepared.preparation);
            }
        }
    }
    if args.json {
        output::write_json(
            &json!({ "prepared": done.iter().map(prepared_json).collect::<Vec<_>>() }),
        )?;
    } else {
        let mut text = String::new();
        for prepared in &done {
            let name = &prepared.preparation.name;
            match &prepared.result {
                Ok(()) => writeln!(
                    text,
                    "{}      {}  {}",
                    Paint::Good.paint("ok"),
                    Paint::Name.paint(name.as_str()),
                    Paint::Dim.paint(&prepared.step.command)
                ),
                Err(reason) => writeln!(
                    text,
                    "{}  {}  {reason}",
                    Paint::Bad.paint("failed"),
                    Paint::Name.paint(name.as_str())
                ),
            }
            .context("cannot format the report")?;
        }
        output::write_text(&text)?;
    }
    Ok(if done.iter().all(|prepared| prepared.result.is_ok()) {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// `Ok` when the file of `preparation` loads in `catalog` (or is shadowed by another), else
/// its problem.
fn loads(catalog: &Catalog, preparation: &Preparation) -> Result<(), String> {
    match catalog
        .problems()
        .iter()
        .find(|problem| problem.path == preparation.path)
    {
        Some(problem) => Err(format!(
            "prepared, but it still does not load offline: {}",
            problem.message()
        )),
        None => Ok(()),
    }
}

fn prepared_json(prepared: &Prepared) -> serde_json::Value {
    json!({
        "name": prepared.preparation.name.as_str(),
        "path": prepared.preparation.path,
        "runner": prepared.preparation.runner.label(),
        "command": prepared.step.command,
        "network": {"granted": NETWORK_GRANTED, "needed": [prepared.step.index]},
        "ok": prepared.result.is_ok(),
        "error": prepared.result.as_ref().err(),
    })
}
