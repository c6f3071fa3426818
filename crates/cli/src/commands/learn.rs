//! `toolsmith learn NAME [--json]`: the narrowest sandbox declaration under which the tool's
//! declared tests pass, learned by [`toolsmith_registry::Toolsmith::learn`]; status 1 when a test fails
//! even in the recording sandbox (no declaration is printed).

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
use toolsmith_registry::{CaseOutcome, Learning, ToolName};

use crate::args::LearnArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::output;
use crate::settings::GlobalSettings;

pub(crate) async fn learn(
    args: &LearnArgs,
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
    let name = ToolName::from_exposed_or_plain(&args.name)
        .with_context(|| format!("invalid tool name {:?}", args.name))?;
    let catalog = discover::discover_tool(global, &toolsmith, &name).await;
    let tool = catalog
        .get(&name)
        .with_context(|| format!("no tool named {name}"))?;
    anyhow::ensure!(
        !tool.tests().is_empty(),
        "tool {name} declares no tests (a `tests` list in its description or frontmatter): there is nothing to learn from"
    );
    let learning = toolsmith
        .learn(tool)
        .await
        .with_context(|| format!("cannot run the tests of {name}"))?;
    match learning {
        Learning::Learned {
            declaration,
            outcomes,
        } => {
            if args.json {
                output::write_json(&json!({"sandbox": declaration.to_json()}))?;
            } else {
                let mut text = String::new();
                let sandbox = declaration.to_json();
                for key in ["network", "filesystem"] {
                    if let Some(value) = sandbox.get(key) {
                        let _ = writeln!(text, "{key} = {value}");
                    }
                }
                output::write_text(&text)?;
            }
            tracing::info!(
                "{} case(s) of {name} pass under the learned declaration",
                outcomes.len()
            );
            Ok(ExitStatus::Success)
        }
        Learning::FailedRecording { outcomes } => {
            report_failures(
                &name,
                "even in the recording sandbox (the operator's grant)",
                &outcomes,
            );
            Ok(ExitStatus::Failure)
        }
        Learning::FailedNarrowed {
            declaration,
            outcomes,
        } => {
            report_failures(
                &name,
                &format!(
                    "under the widest declaration the record allows, {}",
                    declaration.to_json()
                ),
                &outcomes,
            );
            Ok(ExitStatus::Failure)
        }
    }
}

/// One stderr line per failing case; stdout stays empty, since there is no declaration.
fn report_failures(name: &ToolName, when: &str, outcomes: &[CaseOutcome]) {
    let mut text = String::new();
    for outcome in outcomes.iter().filter(|outcome| !outcome.passed()) {
        let _ = writeln!(
            text,
            "error: test {name}: {} fails {when}: {}",
            outcome.name,
            outcome.mismatch.as_deref().unwrap_or_default()
        );
    }
    let _ = writeln!(
        text,
        "hint: no declaration was learned; run `toolsmith test {name}` to see each case"
    );
    output::write_stderr(&text);
}
