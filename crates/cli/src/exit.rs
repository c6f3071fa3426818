//! The process exit status, a small documented enum.

use std::process::ExitCode;

/// How `toolsmith` exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: the command did its job (for `run`: the envelope has `tool_success: true`).
    Success,
    /// 1: the tool or check failed; its envelope or report was still printed.
    Failure,
    /// 2: bad usage, bad configuration, or an internal error; one line on stderr says which.
    Error,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(match status {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Error => 2,
        })
    }
}
