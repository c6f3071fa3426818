//! `toolsmith test [NAME]`: run the test cases tools declare, one line per case with what differs on failure; status 1 when any case fails.

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use toolsmith_executor::Executor;
use toolsmith_registry::{CaseOutcome, Tool, ToolName};

use crate::args::TestArgs;
use crate::commands::discover;
use crate::exit::ExitStatus;
use crate::output;
use crate::settings::GlobalSettings;

pub(crate) async fn test(
    args: &TestArgs,
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
    let catalog = match &args.name {
        Some(text) => {
            let name = ToolName::from_exposed_or_plain(text)
                .with_context(|| format!("invalid tool name {text:?}"))?;
            discover::discover_tool(global, &toolsmith, &name).await
        }
        None => discover::discover(global, &toolsmith, &|_| {}).await,
    };
    let tools: Vec<&Tool> = match &args.name {
        Some(text) => {
            let name = ToolName::from_exposed_or_plain(text)
                .with_context(|| format!("invalid tool name {text:?}"))?;
            let tool = catalog
                .get(&name)
                .with_context(|| format!("no tool named {name}"))?;
            anyhow::ensure!(
                !tool.tests().is_empty(),
                "tool {name} declares no tests (a `tests` list in its description or frontmatter)"
            );
            vec![tool]
        }
        None => catalog
            .tools()
            .iter()
            .filter(|tool| !tool.tests().is_empty())
            .collect(),
    };
    if tools.is_empty() {
        tracing::warn!("no tool declares tests");
    }
    let mut results: Vec<(&Tool, Vec<CaseOutcome>)> = Vec::new();
    for tool in tools {
        let outcomes = toolsmith
            .run_tests(tool)
            .await
            .with_context(|| format!("cannot run the tests of {}", tool.name()))?;
        results.push((tool, outcomes));
    }
    let total: usize = results.iter().map(|(_, outcomes)| outcomes.len()).sum();
    let failed: usize = results
        .iter()
        .flat_map(|(_, outcomes)| outcomes)
        .filter(|outcome| !outcome.passed())
        .count();
    if args.json {
        let tools: Vec<_> = results
            .iter()
            .map(|(tool, outcomes)| {
                json!({
                    "name": tool.name().as_str(),
                    "path": tool.path(),
                    "cases": outcomes.iter().map(|outcome| json!({
                        "name": outcome.name,
                        "passed": outcome.passed(),
                        "input": outcome.case.input,
                        "expect": outcome.case.expect.to_json(),
                        "mismatch": outcome.mismatch,
                        "envelope": outcome.envelope,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        output::write_json(&json!({
            "tools": tools,
            "cases": total,
            "failed": failed,
        }))?;
    } else {
        let mut text = String::new();
        for (tool, outcomes) in &results {
            for outcome in outcomes {
                let _ = match &outcome.mismatch {
                    None => writeln!(text, "ok   {}: {}", tool.name(), outcome.name),
                    Some(mismatch) => {
                        writeln!(text, "FAIL {}: {}: {mismatch}", tool.name(), outcome.name)
                    }
                };
            }
        }
        let _ = writeln!(
            text,
            "{total} case{}, {failed} failed",
            if total == 1 { "" } else { "s" }
        );
        output::write_text(&text)?;
    }
    Ok(if failed == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
