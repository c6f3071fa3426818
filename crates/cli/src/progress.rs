//! Progress on a terminal: the discovery bar (only for discoveries long enough to need one) and a running tool's own reports.

use std::io::IsTerminal;
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use toolsmith_registry::{DiscoveryProgress, Progress};

/// Below this many candidates discovery takes about a second, and a bar
/// would only flicker.
const MIN_CANDIDATES: usize = 50;

/// A bar that appears once discovery reports more than [`MIN_CANDIDATES`]
/// candidates, if stderr is a terminal; on a pipe it never draws anything,
/// so captured stderr holds no escape codes.
#[derive(Debug)]
pub(crate) struct DiscoveryBar {
    on_terminal: bool,
    bar: OnceLock<ProgressBar>,
}

impl DiscoveryBar {
    pub(crate) fn new() -> DiscoveryBar {
        DiscoveryBar {
            on_terminal: std::io::stderr().is_terminal(),
            bar: OnceLock::new(),
        }
    }

    /// Takes one report from discovery.
    pub(crate) fn update(&self, progress: DiscoveryProgress) {
        if !self.on_terminal || progress.total <= MIN_CANDIDATES {
            return;
        }
        let bar = self.bar.get_or_init(|| {
            let total = u64::try_from(progress.total).unwrap_or(u64::MAX);
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            // The template is a constant, so it always parses; the default
            // style is a fine fallback all the same.
            if let Ok(style) = ProgressStyle::with_template("probing tools {bar:30} {pos}/{len}") {
                bar.set_style(style);
            }
            bar
        });
        bar.set_position(u64::try_from(progress.probed).unwrap_or(u64::MAX));
    }

    /// Removes the bar, so that what follows starts on a clean line.
    pub(crate) fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

/// The progress line of `toolsmith run`: the tool's own reports, on a terminal only.
#[derive(Debug)]
pub(crate) struct ToolBar {
    on_terminal: bool,
    bar: OnceLock<ProgressBar>,
}

impl ToolBar {
    pub(crate) fn new() -> ToolBar {
        ToolBar {
            on_terminal: std::io::stderr().is_terminal(),
            bar: OnceLock::new(),
        }
    }

    /// Whether anything would be shown: without a terminal the tool is not even given a
    /// progress channel.
    pub(crate) fn shows(&self) -> bool {
        self.on_terminal
    }

    /// Shows one report of the tool.
    pub(crate) fn update(&self, progress: &Progress) {
        if !self.on_terminal {
            return;
        }
        let bar = self.bar.get_or_init(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            // The templates are constants, so they always parse; the default style is a
            // fine fallback all the same.
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
                bar.set_style(style);
            }
            bar
        });
        let amount = match progress.total {
            Some(total) => format!("{}/{}", progress.progress, total),
            None => progress.progress.to_string(),
        };
        match &progress.message {
            Some(message) => bar.set_message(format!("{amount} {message}")),
            None => bar.set_message(amount),
        }
        bar.tick();
    }

    /// Removes the line, so that what follows starts on a clean line.
    pub(crate) fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}
