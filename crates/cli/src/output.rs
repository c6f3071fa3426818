//! Writing data to stdout: JSON documents and plain text, nothing else.

use std::io::Write;

use anyhow::Context;

/// Writes `value` as pretty JSON and a newline, keeping its field order.
pub(crate) fn write_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)
        .map_err(std::io::Error::from)
        .context("cannot write to stdout")?;
    writeln!(stdout).context("cannot write to stdout")?;
    stdout.flush().context("cannot write to stdout")
}

/// Writes `text` as is.
pub(crate) fn write_text(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("cannot write to stdout")?;
    stdout.flush().context("cannot write to stdout")
}
