//! The runner of declared tests: calls a tool once per [`TestCase`], as every call is made
//! ([`invoke_target`]), and compares each envelope with the case's expectation.

use serde_json::Value;

use crate::call::identity::CallIdentity;
use crate::call::invoke::{Target, invoke_target};
use crate::context::Context;
use crate::envelope::Envelope;
use crate::error::Error;
use crate::formats::declared_tests::TestCase;
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

/// Runs `cases` against `tool`, one after the other, each a call of its own (so under the
/// tool's normal limits, environment and policy).
pub(crate) async fn run_cases(
    context: &Context,
    tool: &Tool,
    cases: &[TestCase],
) -> Result<Vec<CaseOutcome>, Error> {
    let mut outcomes = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        let envelope = invoke_target(
            context,
            Target::Tool(tool),
            &Value::Object(case.input.clone()),
            &CallIdentity::alone(),
            None,
            None,
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
