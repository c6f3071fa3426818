//! The runner of declared tests: calls a tool once per [`TestCase`] through [`invoke`] and
//! compares each envelope with the case's expectation.

use std::sync::Arc;

use serde_json::Value;
use toolsmith_executor::Executor;

use crate::call::invoke::invoke;
use crate::envelope::Envelope;
use crate::error::Error;
use crate::formats::declared_tests::TestCase;
use crate::overrides::RunConfig;
use crate::policy::Policy;
use crate::tool::Tool;

/// How one declared test case went.
#[derive(Debug, Clone)]
pub struct CaseOutcome {
    /// The case's display name.
    pub name: String,
    /// The case.
    pub case: TestCase,
    /// The envelope of the call.
    pub envelope: Envelope,
    /// `None` when the case passed, otherwise what differs.
    pub mismatch: Option<String>,
}

impl CaseOutcome {
    /// True when the envelope met the expectation.
    pub fn passed(&self) -> bool {
        self.mismatch.is_none()
    }
}

/// Runs `cases` against `tool`, one after the other, each through [`invoke`] (so under the
/// tool's normal limits, environment and policy).
pub async fn run_cases(
    executor: &Arc<Executor>,
    tool: &Tool,
    cases: &[TestCase],
    config: &RunConfig,
    policy: &Policy,
) -> Result<Vec<CaseOutcome>, Error> {
    let mut outcomes = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        let envelope = invoke(
            executor,
            tool,
            &Value::Object(case.input.clone()),
            config,
            policy,
        )
        .await?;
        outcomes.push(CaseOutcome {
            name: case.display_name(index),
            case: case.clone(),
            mismatch: case.expect.mismatch(&envelope),
            envelope,
        });
    }
    Ok(outcomes)
}

/// Runs the tests `tool` declares (see [`Tool::tests`]).
pub async fn run_tests(
    executor: &Arc<Executor>,
    tool: &Tool,
    config: &RunConfig,
    policy: &Policy,
) -> Result<Vec<CaseOutcome>, Error> {
    run_cases(executor, tool, tool.tests(), config, policy).await
}
