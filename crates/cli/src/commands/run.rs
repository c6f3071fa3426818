//! `toolsmith run NAME`: read the arguments, find the tool, call it, print the envelope.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;
use toolsmith_executor::Executor;
use toolsmith_registry::{Envelope, ErrorCode, Metadata, RunConfig, ToolName};

use crate::args::RunArgs;
use crate::exit::ExitStatus;
use crate::output;
use crate::settings::{GlobalSettings, RunSettings};

/// The arguments of the call, from `--input`.
pub(crate) fn read_input(input: &str, cwd: &Path) -> anyhow::Result<Value> {
    let (text, origin) = if input == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the input from stdin")?;
        (text, "stdin".to_owned())
    } else if let Some(file) = input.strip_prefix('@') {
        let text = std::fs::read_to_string(cwd.join(file))
            .with_context(|| format!("cannot read input file {file}"))?;
        (text, file.to_owned())
    } else {
        (input.to_owned(), "--input".to_owned())
    };
    serde_json::from_str(&text)
        .with_context(|| format!("the input from {origin} is not valid JSON"))
}

/// Calls the tool and prints its envelope; the exit status follows `tool_success`.
pub(crate) async fn run(
    args: &RunArgs,
    arguments: &Value,
    global: &GlobalSettings,
    settings: &RunSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let config = RunConfig {
        cwd: settings.cwd.clone(),
        env: global.tool_env(),
        limits: settings.limits.clone(),
        max_timeout: global.max_timeout,
    };
    let envelope = match ToolName::from_exposed_or_plain(&args.name) {
        Ok(name) => {
            let mut cache = global.discovery_cache();
            let catalog = toolsmith_registry::discover_one(
                executor,
                &global.layers,
                &mut cache,
                &name,
                &config,
            )
            .await;
            global.save_discovery_cache(&mut cache);
            toolsmith_registry::invoke_named(executor, &catalog, &args.name, arguments, &config)
                .await
                .context("cannot run the tool")?
        }
        Err(error) => Envelope::failure(
            ErrorCode::ToolNotFound,
            format!("No tool named {:?}: {error}.", args.name),
            Metadata::not_started(),
        ),
    };
    output::write_json(&envelope)?;
    Ok(if envelope.tool_success() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
