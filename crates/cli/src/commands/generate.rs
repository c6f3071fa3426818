//! `toolsmith generate`, `new`, `history` and `rollback`: the generator's commands (requests to registered tools, skeletons for humans, versions of generated tools).

use std::fmt::Write as _;
use std::io::Read;
use std::sync::Arc;

use anyhow::Context;
use serde_json::{Map, Value, json};
use toolsmith_executor::Executor;
use toolsmith_generator::{GeneratorConfig, REQUEST_SCHEMA, Report, Request, Status};
use toolsmith_registry::ToolName;

use crate::args::{GenerateArgs, HistoryArgs, LanguageArg, NewArgs, RollbackArgs};
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::output;
use crate::settings::GlobalSettings;

/// The generator's directories from the settings.
pub(crate) fn generator_config(global: &GlobalSettings) -> GeneratorConfig {
    GeneratorConfig {
        tools_dir: global.generator_tools_dir.clone(),
        drafts_dir: global.drafts_dir.clone(),
        templates_dir: global.templates_dir.clone(),
        may_replace: global.generator_may_replace.clone(),
    }
}

/// The refusal to write tools into an untrusted project, as an error with its `hint:`.
fn refuse_untrusted(global: &GlobalSettings) -> anyhow::Result<()> {
    match crate::trust::untrusted_generation(global) {
        Some(refusal) => Err(refusal.into()),
        None => Ok(()),
    }
}

/// Reads the request (before anything runs, so a missing file is status 2 without side effects).
pub(crate) fn read_request(args: &GenerateArgs, global: &GlobalSettings) -> anyhow::Result<Value> {
    let Some(path) = &args.request else {
        return Ok(Value::Null);
    };
    let (text, origin) = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the request from stdin")?;
        (text, "stdin".to_owned())
    } else {
        let text = std::fs::read_to_string(global.cwd.join(path))
            .with_context(|| format!("cannot read the request file {}", path.display()))?;
        (text, path.display().to_string())
    };
    // The parser's message is kept as text: the `--input` hint of other JSON errors does not apply.
    serde_json::from_str(&text)
        .map_err(|error| anyhow::anyhow!("the request from {origin} is not JSON: {error}"))
}

/// Prints the request schema.
pub(crate) fn print_schema() -> anyhow::Result<ExitStatus> {
    output::write_text(REQUEST_SCHEMA)?;
    Ok(ExitStatus::Success)
}

/// Runs the pipeline and prints the report: status 0 when registered or scaffolded, 1 when
/// rejected.
pub(crate) async fn generate(
    args: &GenerateArgs,
    request: &Value,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    refuse_untrusted(global)?;
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        global.run_config(&global.cwd, None),
        global.policy(None),
    );
    let existing = discover::discover(global, &toolsmith, &|_| {}).await;
    let report = match Request::from_json(request) {
        Ok(request) => toolsmith_generator::generate(
            &toolsmith,
            &request,
            &existing,
            None,
            &generator_config(global),
        )
        .await
        .context("cannot generate the tool")?,
        Err(error) => Report::invalid_request(request, &error),
    };
    if args.json {
        output::write_json(&report)?;
    } else {
        output::write_text(&human_report(&report))?;
    }
    Ok(match report.status {
        Status::Registered | Status::Scaffolded => ExitStatus::Success,
        Status::Rejected => ExitStatus::Failure,
    })
}

fn human_report(report: &Report) -> String {
    let mut text = String::new();
    let path = report
        .path
        .as_ref()
        .map(|path| path.display().to_string())
        .unwrap_or_default();
    let _ = match report.status {
        Status::Registered => writeln!(
            text,
            "registered {} version {} at {path}",
            report.name,
            report.version.unwrap_or_default()
        ),
        Status::Scaffolded => writeln!(
            text,
            "scaffolded {} in {path} (not registered: the request has no implementation)",
            report.name
        ),
        Status::Rejected => writeln!(text, "rejected {}", report.name),
    };
    for check in &report.checks {
        let mark = if check.ok { "ok  " } else { "FAIL" };
        let _ = match &check.detail {
            Some(detail) if !check.ok => writeln!(text, "  {mark} {}: {detail}", check.name),
            Some(detail) => writeln!(text, "  {mark} {} ({detail})", check.name),
            None => writeln!(text, "  {mark} {}", check.name),
        };
    }
    if let Some(commit) = &report.commit {
        let _ = writeln!(text, "history commit {commit}");
    }
    for repair in &report.repairs {
        let _ = writeln!(text, "repaired first: {repair}");
    }
    text
}

/// The request `new` renders: the name, language, description and `--param`s.
pub(crate) fn new_request(args: &NewArgs) -> anyhow::Result<Value> {
    let mut parameters = Map::new();
    for param in &args.params {
        let mut parts = param.splitn(3, ':');
        let name = parts.next().unwrap_or_default();
        let kind = parts.next().with_context(|| {
            format!("--param {param:?} must be NAME:TYPE[:required][:DESCRIPTION]")
        })?;
        let rest = parts.next().unwrap_or_default();
        let (required, description) = match rest.strip_prefix("required") {
            Some(after) if after.is_empty() || after.starts_with(':') => {
                (true, after.strip_prefix(':').unwrap_or_default())
            }
            _ => (false, rest),
        };
        let mut spec = Map::new();
        spec.insert("type".to_owned(), Value::from(kind));
        if required {
            spec.insert("required".to_owned(), Value::Bool(true));
        }
        if !description.is_empty() {
            spec.insert("description".to_owned(), Value::from(description));
        }
        parameters.insert(name.to_owned(), Value::Object(spec));
    }
    let language = match args.lang {
        LanguageArg::Python => "python",
        LanguageArg::Bash => "bash",
        LanguageArg::Manifest => "manifest",
    };
    Ok(json!({
        "name": args.name,
        "description": args.description.clone().unwrap_or_else(|| format!("The {} tool.", args.name)),
        "language": language,
        "parameters": parameters,
    }))
}

/// Writes the skeleton; refuses to overwrite (status 2).
pub(crate) fn new(args: &NewArgs, global: &GlobalSettings) -> anyhow::Result<ExitStatus> {
    let request = new_request(args)?;
    let dir = match &args.dir {
        Some(dir) => global.cwd.join(dir),
        None => global.generator_tools_dir.clone(),
    };
    if args.dir.is_none() {
        refuse_untrusted(global)?;
    }
    let path = toolsmith_generator::new_tool(&dir, &request, global.templates_dir.as_deref())
        .context("cannot write the new tool")?;
    output::write_text(&format!("{}\n", path.display()))?;
    Ok(ExitStatus::Success)
}

fn tool_name(text: &str) -> anyhow::Result<ToolName> {
    ToolName::from_exposed_or_plain(text).with_context(|| format!("invalid tool name {text:?}"))
}

/// Lists the versions, oldest first.
pub(crate) fn history(args: &HistoryArgs, global: &GlobalSettings) -> anyhow::Result<ExitStatus> {
    let name = tool_name(&args.name)?;
    // What a crash left is repaired first, so the history shows what is live.
    let repairs = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("cannot start the async runtime")?
        .block_on(toolsmith_generator::recover(&global.generator_tools_dir))
        .context("cannot check the tools directory")?;
    for repair in &repairs {
        tracing::warn!("repaired: {repair}");
    }
    let versions = toolsmith_generator::history(&global.generator_tools_dir, &name)
        .context("cannot read the history")?;
    if args.json {
        output::write_json(&json!({"name": name.as_str(), "versions": versions}))?;
        return Ok(ExitStatus::Success);
    }
    let mut text = String::new();
    for version in &versions {
        let _ = writeln!(
            text,
            "v{}  {}  {}",
            version.version,
            &version.commit[..12.min(version.commit.len())],
            version.message
        );
    }
    output::write_text(&text)?;
    Ok(ExitStatus::Success)
}

/// Restores a version and prints the new one.
pub(crate) async fn rollback(
    args: &RollbackArgs,
    global: &GlobalSettings,
    executor: &Arc<Executor>,
) -> anyhow::Result<ExitStatus> {
    let name = tool_name(&args.name)?;
    // The restored version's checks run as a registration's do: in the sandbox of every call.
    let toolsmith = toolsmith_registry::Toolsmith::from_parts(
        Arc::clone(executor),
        global.run_config(&global.cwd, None),
        global.policy(None),
    );
    let version = toolsmith_generator::rollback(
        &toolsmith,
        &global.generator_tools_dir,
        &name,
        args.to,
        None,
    )
    .await
    .context("cannot roll back")?;
    if args.json {
        output::write_json(&version)?;
    } else {
        output::write_text(&format!(
            "{} is now version {} ({})\n",
            name.as_str(),
            version.version,
            version.message
        ))?;
    }
    Ok(ExitStatus::Success)
}
