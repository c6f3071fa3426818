//! The one-line form of every message toolsmith shows: an error and its causes.

/// An error and its causes as one line, joined by `: `: the form of every message
/// toolsmith shows (problems, reports, MCP errors).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// The first non-empty line of `text`, trimmed and cut to 200 characters.
pub(crate) fn first_line(text: &str) -> Option<String> {
    const MAX_CHARS: usize = 200;
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| line.chars().take(MAX_CHARS).collect())
}
