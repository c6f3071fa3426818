//! The one-line form of every message toolsmith shows: an error and its causes, and the
//! durations in them.

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

/// A duration as toolsmith writes it everywhere (messages, settings, reports), in the largest
/// unit that keeps it whole: `0s`, `500ms`, `1500ms`, `30s`, `2m`, `1h`. The CLI's duration
/// parser reads every form back.
pub fn format_duration(duration: std::time::Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        "0s".to_owned()
    } else if millis.is_multiple_of(3_600_000) {
        format!("{}h", millis / 3_600_000)
    } else if millis.is_multiple_of(60_000) {
        format!("{}m", millis / 60_000)
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{millis}ms")
    }
}

/// The first non-empty line of `text`, trimmed and cut to 200 characters.
pub(crate) fn first_line(text: &str) -> Option<String> {
    const MAX_CHARS: usize = 200;
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| line.chars().take(MAX_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::message::format_duration;

    #[test]
    fn durations() {
        let check =
            |duration: Duration, expect: &str| assert_eq!(format_duration(duration), expect);
        check(Duration::ZERO, "0s");
        check(Duration::from_millis(500), "500ms");
        check(Duration::from_millis(1500), "1500ms");
        check(Duration::from_secs(30), "30s");
        check(Duration::from_secs(120), "2m");
        check(Duration::from_secs(90), "90s");
        check(Duration::from_secs(7200), "2h");
    }
}
