//! The result envelope every call returns: success with a result, or failure with a sentence and a code, plus run metadata.

use std::fmt;
use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;
use toolsmith_executor::{Outcome, Termination};

use crate::sandbox::SandboxReport;

/// The most stderr text kept in [`Metadata::stderr`].
pub const METADATA_STDERR_LIMIT: usize = 8 * 1024;

/// The most stdout text kept in [`Metadata::stdout`] of a failed call.
pub const METADATA_STDOUT_LIMIT: usize = 16 * 1024;

/// Why a call did not do its job as a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// No tool has the requested name.
    ToolNotFound,
    /// The arguments do not meet the tool's input schema; nothing was run.
    InvalidParams,
    /// The tool exceeded its wall-clock timeout and was killed.
    ToolTimeout,
    /// The tool exited with a non-zero status or was killed by a signal.
    ToolCrashed,
    /// The tool's output did not meet its declared output format.
    InvalidOutput,
    /// The tool used up its CPU time limit.
    CpuLimit,
    /// The tool exceeded its memory limit.
    MemoryLimit,
    /// The tool's program could not be started.
    SpawnFailed,
    /// Policy forbids this call.
    PolicyDenied,
}

impl ErrorCode {
    /// The code as written in envelopes, e.g. `TOOL_TIMEOUT`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ToolNotFound => "TOOL_NOT_FOUND",
            ErrorCode::InvalidParams => "INVALID_PARAMS",
            ErrorCode::ToolTimeout => "TOOL_TIMEOUT",
            ErrorCode::ToolCrashed => "TOOL_CRASHED",
            ErrorCode::InvalidOutput => "INVALID_OUTPUT",
            ErrorCode::CpuLimit => "CPU_LIMIT",
            ErrorCode::MemoryLimit => "MEMORY_LIMIT",
            ErrorCode::SpawnFailed => "SPAWN_FAILED",
            ErrorCode::PolicyDenied => "POLICY_DENIED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// The tool ran and exited 0. `result` is its stdout as JSON when it
    /// parses, else as text. An `{"error": ...}` result is still a success:
    /// the tool reported an operation failure, it did not fail as a program.
    Success {
        /// The tool's output.
        result: Value,
    },
    /// The tool could not do its job as a program.
    Failure {
        /// A sentence for the LLM or the user.
        error: String,
        /// What kind of failure.
        error_code: ErrorCode,
    },
}

/// How a call went, in numbers. Serialized fields that are `None` are left out.
///
/// When no process was started (`TOOL_NOT_FOUND`, `INVALID_PARAMS`,
/// `SPAWN_FAILED`) there is neither `exit_code` nor `signal`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Metadata {
    /// Wall time of the run in milliseconds (0 when nothing ran).
    pub execution_time_ms: u64,
    /// The exit status, when the tool exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that killed the tool, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// True when stdout was longer than the output limit and was cut.
    pub stdout_truncated: bool,
    /// True when the kept stdout is not UTF-8 (binary output, or a character cut by the
    /// output limit), so a text result holds U+FFFD where its invalid bytes were. Only
    /// serialized when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stdout_lossy: bool,
    /// What the tool printed on stdout before it failed (a timeout, a limit, a
    /// crash), as lossy UTF-8, at most [`METADATA_STDOUT_LIMIT`] bytes, so an agent
    /// sees how far it got. Only in failure envelopes of a tool that printed something
    /// (a success carries its stdout as the result).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// The start of stderr as lossy UTF-8, at most [`METADATA_STDERR_LIMIT`] bytes.
    pub stderr: String,
    /// True when `stderr` is shorter than what the tool wrote.
    pub stderr_truncated: bool,
    /// Bytes the tool wrote to stdout, kept or not.
    pub stdout_bytes: u64,
    /// Bytes the tool wrote to stderr, kept or not.
    pub stderr_bytes: u64,
    /// CPU time in milliseconds, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_time_ms: Option<u64>,
    /// Peak resident memory in KiB, where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_kb: Option<u64>,
    /// The limit that ended the run: `timeout`, `cpu` or `memory`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// True when SIGTERM was not enough and the tool was killed with SIGKILL.
    pub escalated: bool,
    /// Processes left behind by the tool that were killed after it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leftovers_killed: Option<u64>,
    /// The containment backend that ran the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The isolation that applied to the run, for audits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxReport>,
    /// Every connection the run asked its egress proxy for, as the executor recorded it
    /// (`Outcome::egress`); `toolsmith learn` reads the allowed destinations from it. Not
    /// serialized here: the envelope reports refusals in `sandbox.denied`.
    #[serde(skip)]
    pub egress: Vec<toolsmith_executor::EgressEvent>,
}

impl Metadata {
    /// Adds what the tool printed on stdout, bounded, for a failure envelope.
    pub fn with_partial_stdout(mut self, outcome: &Outcome) -> Metadata {
        if !outcome.stdout.bytes.is_empty() {
            let text = outcome.stdout.text_lossy();
            let kept = truncate_at_char_boundary(&text, METADATA_STDOUT_LIMIT);
            self.stdout_truncated |= kept.len() < text.len();
            self.stdout = Some(kept.to_owned());
        }
        self
    }

    /// Metadata of a call that started no process.
    pub fn not_started() -> Metadata {
        Metadata {
            execution_time_ms: 0,
            exit_code: None,
            signal: None,
            stdout_truncated: false,
            stdout_lossy: false,
            stdout: None,
            stderr: String::new(),
            stderr_truncated: false,
            stdout_bytes: 0,
            stderr_bytes: 0,
            cpu_time_ms: None,
            peak_rss_kb: None,
            limit: None,
            escalated: false,
            leftovers_killed: None,
            backend: None,
            sandbox: None,
            egress: Vec::new(),
        }
    }

    /// Metadata of a finished run.
    pub fn from_outcome(outcome: &Outcome) -> Metadata {
        let (exit_code, signal) = match outcome.termination {
            Termination::Exited(code) => (Some(code), None),
            Termination::Signaled(signal) => (None, Some(signal)),
        };
        let stderr_text = outcome.stderr.text_lossy();
        let stderr = truncate_at_char_boundary(&stderr_text, METADATA_STDERR_LIMIT);
        Metadata {
            execution_time_ms: millis(outcome.wall_time),
            exit_code,
            signal,
            stdout_truncated: outcome.stdout.truncated,
            stdout_lossy: std::str::from_utf8(&outcome.stdout.bytes).is_err(),
            stderr_truncated: outcome.stderr.truncated || stderr.len() < stderr_text.len(),
            stdout: None,
            stderr: stderr.to_owned(),
            stdout_bytes: outcome.stdout.total,
            stderr_bytes: outcome.stderr.total,
            cpu_time_ms: outcome.cpu_time.map(millis),
            peak_rss_kb: outcome.peak_memory.map(|bytes| bytes / 1024),
            limit: outcome.limit.map(|limit| limit.to_string()),
            escalated: outcome.escalated,
            leftovers_killed: outcome.leftovers_killed,
            backend: Some(outcome.backend.to_string()),
            sandbox: Some(SandboxReport::from_applied(&outcome.sandbox)),
            egress: outcome.egress.clone(),
        }
    }
}

/// The answer to one call: what it produced and how the run went.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The result or the failure.
    pub body: Body,
    /// Numbers about the run.
    pub metadata: Metadata,
}

impl Envelope {
    /// A failure envelope.
    pub fn failure(error_code: ErrorCode, error: String, metadata: Metadata) -> Envelope {
        Envelope {
            body: Body::Failure { error, error_code },
            metadata,
        }
    }

    /// False when the tool could not do its job as a program.
    pub fn tool_success(&self) -> bool {
        matches!(self.body, Body::Success { .. })
    }

    /// The failure code, if the call failed.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self.body {
            Body::Success { .. } => None,
            Body::Failure { error_code, .. } => Some(error_code),
        }
    }
}

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        match &self.body {
            Body::Success { result } => {
                map.serialize_entry("tool_success", &true)?;
                map.serialize_entry("result", result)?;
            }
            Body::Failure { error, error_code } => {
                map.serialize_entry("tool_success", &false)?;
                map.serialize_entry("error", error)?;
                map.serialize_entry("error_code", error_code)?;
            }
        }
        map.serialize_entry("metadata", &self.metadata)?;
        map.end()
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn truncate_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::envelope::truncate_at_char_boundary;
    use crate::envelope::{Body, Envelope, ErrorCode, Metadata};

    fn check(envelope: Envelope, expect: serde_json::Value) {
        assert_eq!(serde_json::to_value(&envelope).unwrap(), expect);
    }

    #[test]
    fn success() {
        check(
            Envelope {
                body: Body::Success {
                    result: json!({"a": 1}),
                },
                metadata: Metadata::not_started(),
            },
            json!({
                "tool_success": true,
                "result": {"a": 1},
                "metadata": {
                    "execution_time_ms": 0,
                    "stdout_truncated": false,
                    "stderr": "",
                    "stderr_truncated": false,
                    "stdout_bytes": 0,
                    "stderr_bytes": 0,
                    "escalated": false
                }
            }),
        );
    }

    #[test]
    fn failure() {
        let mut metadata = Metadata::not_started();
        metadata.exit_code = Some(3);
        metadata.cpu_time_ms = Some(5);
        check(
            Envelope::failure(ErrorCode::ToolCrashed, "It broke.".to_owned(), metadata),
            json!({
                "tool_success": false,
                "error": "It broke.",
                "error_code": "TOOL_CRASHED",
                "metadata": {
                    "execution_time_ms": 0,
                    "exit_code": 3,
                    "stdout_truncated": false,
                    "stderr": "",
                    "stderr_truncated": false,
                    "stdout_bytes": 0,
                    "stderr_bytes": 0,
                    "cpu_time_ms": 5,
                    "escalated": false
                }
            }),
        );
    }

    #[test]
    fn codes_serialize_as_their_names() {
        for code in [
            ErrorCode::ToolNotFound,
            ErrorCode::InvalidParams,
            ErrorCode::ToolTimeout,
            ErrorCode::ToolCrashed,
            ErrorCode::InvalidOutput,
            ErrorCode::CpuLimit,
            ErrorCode::MemoryLimit,
            ErrorCode::SpawnFailed,
            ErrorCode::PolicyDenied,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
        }
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate_at_char_boundary("héllo", 2), "h");
        assert_eq!(truncate_at_char_boundary("héllo", 3), "hé");
        assert_eq!(truncate_at_char_boundary("abc", 10), "abc");
    }
}
