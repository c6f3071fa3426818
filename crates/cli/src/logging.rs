//! Logs: `tracing` to stderr, filtered by `TOOLSMITH_LOG`, never to stdout.

use tracing_subscriber::EnvFilter;

use crate::env_vars::EnvVars;
use crate::output;

/// Installs the stderr subscriber; the default filter is `warn`.
pub(crate) fn init() {
    let filter =
        EnvFilter::try_from_env(EnvVars::TOOLSMITH_LOG).unwrap_or_else(|_| EnvFilter::new("warn"));
    let ansi = output::colors().stderr;
    // A second initialization (tests calling `main` twice) keeps the first subscriber.
    let _already_set = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .try_init();
}
