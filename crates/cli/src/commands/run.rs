//! `toolsmith run NAME`: read the arguments, find the tool, call it, print the envelope.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;
use std::future::IntoFuture as _;
use toolsmith_executor::Executor;

use toolsmith_registry::{
    AuditLog, AuditedCall, CallIdentity, Envelope, ErrorCode, Metadata, Progress, ToolName,
    Toolsmith,
};

use crate::args::RunArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::output;
use crate::progress::ToolBar;
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
///
/// With an audit log set, the log is opened before anything runs, so that a
/// log that cannot be written stops the call (status 2) without side effects.
/// If the line cannot be written after the call, the envelope is still
/// printed (the tool has run, and its result is real), then the error, and
/// the status is 2: an operator who relies on the audit learns that a call
/// went unrecorded.
pub(crate) async fn run(
    args: &RunArgs,
    arguments: &Value,
    global: &GlobalSettings,
    settings: &RunSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let audit = global
        .audit_path
        .as_deref()
        .map(AuditLog::open)
        .transpose()?;
    let tool_name = settings
        .tool
        .as_ref()
        .map_or(args.name.as_str(), ToolName::as_str);
    // One CLI invocation is one session of one call.
    let identity = CallIdentity::alone();
    let call = AuditedCall::start(tool_name, arguments, None, identity.call_id());
    let toolsmith = Toolsmith::from_parts(
        Arc::clone(executor),
        settings.run_config.clone(),
        settings.policy.clone(),
    );
    let envelope = match &settings.tool {
        Ok(name) => {
            let catalog = discover::discover_tool(global, &toolsmith, name).await;
            let bar = ToolBar::new();
            let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
            // The front door words every refusal, an unknown name included (naming files of
            // that name that failed to load).
            let mut invocation = toolsmith
                .call(&catalog, &args.name, arguments)
                .in_session(&identity);
            if bar.shows() {
                invocation = invocation.with_progress(sender);
            } else {
                drop(sender);
            }
            let show = async {
                while let Some(line) = receiver.recv().await {
                    if let Some(progress) = Progress::parse(&line) {
                        bar.update(&progress);
                    }
                }
            };
            let (envelope, ()) = tokio::join!(invocation.into_future(), show);
            bar.finish();
            envelope.context("cannot run the tool")?
        }
        Err(error) => {
            let reason = format!(": {error}");
            Envelope::failure(
                ErrorCode::ToolNotFound,
                format!("No tool named {:?}{reason}.", args.name),
                Metadata::not_started(),
            )
        }
    };
    // The line is written before the envelope, so that a reader that goes
    // away (a closed pipe) cannot leave a call unrecorded.
    let audited = call.finish(audit.as_ref(), &envelope);
    output::write_json(&envelope)?;
    if envelope.error_code() == Some(ErrorCode::ToolNotFound) {
        let hint = super::unknown_tool_hint(&args.name, global, executor).await;
        output::write_stderr(&hint);
    }
    audited?;
    Ok(if envelope.tool_success() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
