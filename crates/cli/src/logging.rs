//! Logs: `tracing` to stderr, filtered by `TOOLSMITH_LOG`, never to stdout; as text for a
//! person, or as JSON lines for a log pipeline (`--log-format json`, `TOOLSMITH_LOG_FORMAT`).

use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

use crate::env_vars::EnvVars;
use crate::output;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    // Plain comments, not docs: clap would turn documented values into a long `--help`.
    // One readable line per event, coloured on a terminal.
    Text,
    // One JSON object per line: `timestamp`, `level`, `target`, and `fields` (`message` and
    // the event's fields, such as `client`, `tool` and `outcome`).
    Json,
}

/// The target of the events that always show, whatever the filter: where `serve --http`
/// listens. In text they are plain lines of their own; in JSON they go through `tracing`.
pub(crate) const ANNOUNCE_TARGET: &str = "toolsmith::announce";

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The format chosen at start (text before [`init`]).
pub(crate) fn format() -> LogFormat {
    FORMAT.get().copied().unwrap_or(LogFormat::Text)
}

/// The format of `--log-format`, else of `$TOOLSMITH_LOG_FORMAT`, else text; an unknown value
/// in the environment is ignored with a warning once logging runs.
pub(crate) fn resolve(flag: Option<LogFormat>) -> (LogFormat, Option<String>) {
    if let Some(format) = flag {
        return (format, None);
    }
    match std::env::var(EnvVars::TOOLSMITH_LOG_FORMAT) {
        Ok(value) if value.is_empty() => (LogFormat::Text, None),
        Ok(value) => match <LogFormat as clap::ValueEnum>::from_str(&value, true) {
            Ok(format) => (format, None),
            Err(_) => (
                LogFormat::Text,
                Some(format!(
                    "{} is {value:?}, not `text` or `json`: logging as text",
                    EnvVars::TOOLSMITH_LOG_FORMAT
                )),
            ),
        },
        Err(_) => (LogFormat::Text, None),
    }
}

/// Installs the stderr subscriber; the default filter is `warn`.
pub(crate) fn init(flag: Option<LogFormat>) {
    let (format, invalid) = resolve(flag);
    let _first = FORMAT.set(format);
    let filter =
        EnvFilter::try_from_env(EnvVars::TOOLSMITH_LOG).unwrap_or_else(|_| EnvFilter::new("warn"));
    // A second initialization (tests calling `main` twice) keeps the first subscriber.
    let _already_set = match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(output::colors().stderr)
            .with_target(false)
            .without_time()
            .try_init(),
        LogFormat::Json => {
            let filter = match format!("{ANNOUNCE_TARGET}=info").parse() {
                Ok(directive) => filter.add_directive(directive),
                Err(_) => filter,
            };
            tracing_subscriber::fmt()
                .json()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_current_span(false)
                .with_span_list(false)
                .try_init()
        }
    };
    if let Some(warning) = invalid {
        tracing::warn!("{warning}");
    }
}

#[cfg(test)]
mod tests {
    use crate::logging::{LogFormat, resolve};

    #[test]
    fn the_flag_wins_and_text_is_the_default() {
        assert_eq!(resolve(Some(LogFormat::Json)).0, LogFormat::Json);
        assert_eq!(resolve(Some(LogFormat::Text)).0, LogFormat::Text);
    }
}
