//! The progress protocol: a tool writes JSON lines `{"progress": n, "total": m, "message": "..."}` on the file descriptor named by `TOOLSMITH_PROGRESS_FD`.

use serde_json::Value;

/// The environment variable that tells a tool where to write its progress.
pub const PROGRESS_FD_VAR: &str = "TOOLSMITH_PROGRESS_FD";

/// One progress report of a running tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// How far the tool is, in its own unit; reports of one call should increase.
    pub progress: f64,
    /// The value `progress` reaches when the work is done, if the tool knows it.
    pub total: Option<f64>,
    /// What the tool is doing, for a human.
    pub message: Option<String>,
}

impl Progress {
    /// Parses one report line. A line that is not such a JSON object is ignored (`None`):
    /// progress is a courtesy, never a reason to fail a call.
    pub fn parse(line: &[u8]) -> Option<Progress> {
        let value: Value = serde_json::from_slice(line).ok()?;
        let object = value.as_object()?;
        let progress = object
            .get("progress")?
            .as_f64()
            .filter(|value| value.is_finite())?;
        Some(Progress {
            progress,
            total: object
                .get("total")
                .and_then(Value::as_f64)
                .filter(|total| total.is_finite()),
            message: object
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::call::progress::Progress;

    fn check(line: &str, expect: Option<(f64, Option<f64>, Option<&str>)>) {
        let parsed = Progress::parse(line.as_bytes())
            .map(|progress| (progress.progress, progress.total, progress.message));
        let expect =
            expect.map(|(progress, total, message)| (progress, total, message.map(str::to_owned)));
        assert_eq!(parsed, expect, "{line}");
    }

    #[test]
    fn full_report() {
        check(
            r#"{"progress": 2, "total": 5, "message": "copying"}"#,
            Some((2.0, Some(5.0), Some("copying"))),
        );
    }

    #[test]
    fn progress_alone() {
        check(r#"{"progress": 0.5}"#, Some((0.5, None, None)));
    }

    #[test]
    fn anything_else_is_ignored() {
        check("50%", None);
        check(r#"{"total": 5}"#, None);
        check(r#"{"progress": "half"}"#, None);
        check("[1]", None);
    }
}
