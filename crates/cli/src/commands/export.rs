//! `toolsmith export`: print the admitted tools' definitions in one LLM API's exact shape.

use std::sync::Arc;

use toolsmith_executor::Executor;
use toolsmith_registry::Tool;

use crate::args::ExportArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::export::{ExportSettings, export as export_tools};
use crate::output;
use crate::settings::GlobalSettings;

/// Discovers the tools, keeps those policy admits, and prints them for `args.format`.
/// A tool left out for that provider is a warning, not a failure: the others are usable.
pub(crate) async fn export(
    args: &ExportArgs,
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
    let catalog = discover::discover(global, &toolsmith, &|_| {}).await;
    let admitted: Vec<&Tool> = catalog
        .tools()
        .iter()
        .filter(|tool| policy.check(tool).is_ok())
        .collect();
    let settings = ExportSettings {
        provider: args.format,
        strict: args.strict,
        prefix: args.prefix.clone(),
    };
    let exported = export_tools(&admitted, &settings);
    for (name, reason) in &exported.left_out {
        tracing::warn!("left out {name}: {reason}");
    }
    for (name, reason) in &exported.downgraded {
        tracing::warn!("{name} exported {reason}");
    }
    if !catalog.problems().is_empty() {
        tracing::warn!(
            "{} file(s) could not be loaded and are not exported; `toolsmith list --all` shows why",
            catalog.problems().len()
        );
    }
    output::write_json(&exported.document)?;
    Ok(ExitStatus::Success)
}
