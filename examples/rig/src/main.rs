//! `toolsmith-rig [TOOLS_DIR [TOOL [ARGUMENTS_JSON]]]`: discovers a tools directory with
//! toolsmith, hands every tool to a rig `ToolSet`, prints the tool definitions rig would send
//! to a model, and calls one tool through the tool set, printing its result. No model and no
//! network: the model's part is played by the command line.
//!
//! Defaults: toolsmith's `examples/tools`, the tool `hello`, the arguments `{"name":"Ada"}`.
//! Exits 1 when the call fails (the envelope's code and sentence on stderr), 2 when nothing
//! could be called.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use rig_core::tool::ToolContext;

use toolsmith_rig_example::to_rig;
use toolsmith_rig_example::toolbox::Toolbox;

/// The directory discovered when the command line names none: toolsmith's example tools.
const DEFAULT_TOOLS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools");

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(code) => code,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "toolsmith-rig: {error:#}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> anyhow::Result<ExitCode> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .map_or_else(|| PathBuf::from(DEFAULT_TOOLS_DIR), PathBuf::from);
    let tool = args.next().unwrap_or_else(|| "hello".to_owned());
    let arguments = args
        .next()
        .unwrap_or_else(|| r#"{"name":"Ada"}"#.to_owned());
    if let Some(extra) = args.next() {
        anyhow::bail!(
            "unexpected argument {extra:?}: usage: toolsmith-rig [TOOLS_DIR [TOOL [ARGUMENTS_JSON]]]"
        );
    }
    let dir = dir
        .canonicalize()
        .with_context(|| format!("could not open the tools directory `{}`", dir.display()))?;

    let (toolbox, problems) = Toolbox::discover(&dir).await?;
    let mut stderr = std::io::stderr().lock();
    for problem in &problems {
        writeln!(stderr, "toolsmith-rig: not a tool: {problem}")?;
    }
    let toolset = to_rig::tool_set(&Arc::new(toolbox))?;
    anyhow::ensure!(!toolset.is_empty(), "no tool in `{}`", dir.display());

    let mut stdout = std::io::stdout().lock();
    let definitions = serde_json::to_string_pretty(&toolset.tool_definitions())?;
    writeln!(
        stdout,
        "rig tool definitions ({} tools of {}):\n{definitions}",
        toolset.len(),
        dir.display()
    )?;
    writeln!(stdout, "rig ToolSet call: {tool} {arguments}")?;
    stdout.flush()?;

    let result = toolset
        .execute(&tool, arguments, &mut ToolContext::new())
        .await;
    match result.into_result() {
        Ok(output) => {
            writeln!(stdout, "{}", output.render())?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            writeln!(
                stderr,
                "toolsmith-rig: the call failed ({}): {}",
                error.code().unwrap_or(error.kind().as_str()),
                error.message()
            )?;
            Ok(ExitCode::FAILURE)
        }
    }
}
