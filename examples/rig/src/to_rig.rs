//! The rig side of the adapter: every toolsmith tool as a rig [`DynamicTool`] (its name,
//! description and JSON Schema; a callback that runs it through toolsmith), all of them in one
//! rig [`ToolSet`].

use std::sync::Arc;

use anyhow::Context;
use rig_agent::tool::ToolSet;
use rig_core::message::ToolName;
use rig_core::tool::{DynamicTool, ToolErrorKind, ToolExecutionError, ToolOutput};
use serde_json::Value;

use crate::toolbox::{Body, Envelope, ErrorCode, ToolSpec, Toolbox};

/// A rig tool set holding every tool of `toolbox`, in the toolbox's order.
pub fn tool_set(toolbox: &Arc<Toolbox>) -> anyhow::Result<ToolSet> {
    Ok(ToolSet::from_dynamic_tools(dynamic_tools(toolbox)?))
}

/// Every tool of `toolbox` as a rig tool, in the toolbox's order: what rig-agent's
/// `AgentBuilder::dynamic_tools` takes.
pub fn dynamic_tools(toolbox: &Arc<Toolbox>) -> anyhow::Result<Vec<DynamicTool>> {
    toolbox
        .tools()
        .into_iter()
        .map(|spec| dynamic_tool(toolbox, spec))
        .collect()
}

/// `spec` as a rig tool whose call runs the toolsmith tool of that name in `toolbox`.
pub fn dynamic_tool(toolbox: &Arc<Toolbox>, spec: ToolSpec) -> anyhow::Result<DynamicTool> {
    let rig_name = ToolName::new(spec.name.clone())
        .with_context(|| format!("rig refuses the tool name {:?}", spec.name))?;
    let toolbox = Arc::clone(toolbox);
    let name: Arc<str> = Arc::from(spec.name);
    let tool = DynamicTool::new(
        rig_name,
        spec.description,
        spec.parameters,
        move |arguments: Value| {
            let toolbox = Arc::clone(&toolbox);
            let name = Arc::clone(&name);
            Box::pin(async move {
                match toolbox.call(&name, &arguments).await {
                    Ok(envelope) => from_envelope(envelope),
                    Err(error) => Err(ToolExecutionError::other(format!(
                        "toolsmith could not run `{name}`: {error:#}"
                    ))),
                }
            })
        },
    );
    Ok(tool)
}

/// A toolsmith envelope as rig's outcome of a call: the tool's result (text as text, any
/// other JSON as JSON), or an error carrying the envelope's code (`with_code`, and first in
/// what the model reads) and its sentence.
pub fn from_envelope(envelope: Envelope) -> Result<ToolOutput, ToolExecutionError> {
    let (error, code) = match envelope.body {
        Body::Success {
            result: Value::String(text),
        } => return Ok(ToolOutput::text(text)),
        Body::Success { result } => return Ok(ToolOutput::json(result)),
        Body::Failure { error, error_code } => (error, error_code),
    };
    let rig_error = match code {
        // Policy declined the call on purpose: rig's refusal, not a failure of the tool.
        ErrorCode::PolicyDenied => ToolExecutionError::refused(error.clone()),
        ErrorCode::InvalidParams => ToolExecutionError::new(ToolErrorKind::InvalidArgs, &error),
        ErrorCode::ToolNotFound => ToolExecutionError::new(ToolErrorKind::NotFound, &error),
        ErrorCode::ToolTimeout => ToolExecutionError::new(ToolErrorKind::Timeout, &error),
        // A crash, a bad output, a resource limit or a failed start: the same call would
        // fail the same way.
        _ => ToolExecutionError::new(ToolErrorKind::Other, &error).with_retryable(false),
    };
    Err(rig_error
        .with_code(code.as_str())
        .with_model_feedback(format!("{}: {error}", code.as_str())))
}

#[cfg(test)]
mod tests {
    use rig_core::tool::ToolErrorKind;
    use serde_json::json;
    use toolsmith_registry::Metadata;

    use crate::to_rig::from_envelope;
    use crate::toolbox::{Body, Envelope, ErrorCode};

    fn failure(code: ErrorCode) -> rig_core::tool::ToolExecutionError {
        let envelope = Envelope::failure(code, "the sentence".to_owned(), Metadata::not_started());
        from_envelope(envelope).expect_err("a failure envelope is a rig error")
    }

    #[test]
    fn a_result_keeps_its_json_or_its_text() {
        let json_result = Envelope {
            body: Body::Success {
                result: json!({"words": 3}),
            },
            metadata: Metadata::not_started(),
        };
        let output = from_envelope(json_result).expect("a success");
        assert_eq!(output.as_json(), Some(&json!({"words": 3})));
        let text_result = Envelope {
            body: Body::Success {
                result: json!("Hello, Ada!"),
            },
            metadata: Metadata::not_started(),
        };
        let output = from_envelope(text_result).expect("a success");
        assert_eq!(output.as_text(), Some("Hello, Ada!"));
    }

    #[test]
    fn each_error_code_reaches_rig_with_its_code_and_sentence() {
        let codes = [
            ErrorCode::ToolNotFound,
            ErrorCode::InvalidParams,
            ErrorCode::ToolTimeout,
            ErrorCode::ToolCrashed,
            ErrorCode::InvalidOutput,
            ErrorCode::CpuLimit,
            ErrorCode::MemoryLimit,
            ErrorCode::SpawnFailed,
            ErrorCode::PolicyDenied,
        ];
        for code in codes {
            let error = failure(code);
            assert_eq!(error.code(), Some(code.as_str()));
            assert_eq!(error.message(), "the sentence");
            assert_eq!(
                error.model_output().as_text(),
                Some(format!("{}: the sentence", code.as_str()).as_str())
            );
            assert_eq!(
                error.is_refusal(),
                code == ErrorCode::PolicyDenied,
                "{code}"
            );
        }
        assert_eq!(
            failure(ErrorCode::InvalidParams).kind(),
            ToolErrorKind::InvalidArgs
        );
        assert_eq!(
            failure(ErrorCode::ToolTimeout).kind(),
            ToolErrorKind::Timeout
        );
        assert_eq!(failure(ErrorCode::ToolTimeout).retryable(), Some(true));
        assert_eq!(failure(ErrorCode::ToolCrashed).retryable(), Some(false));
    }
}
