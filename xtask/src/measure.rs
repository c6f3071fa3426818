//! Measuring for every section of `cargo xtask bench`: durations in µs, a settled machine
//! before each batch, the distribution of samples, and the report's markdown tables.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

pub(crate) fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// The longest [`settle`] waits.
const SETTLE_BUDGET: Duration = Duration::from_secs(2);

/// One look of [`settle`] at the machine's CPU time.
const SETTLE_WINDOW: Duration = Duration::from_millis(50);

/// Waits until the machine is idle: every core at least 90% idle over a 50 ms window (the
/// deferred work of the last batch is done), or [`SETTLE_BUDGET`] has passed (a machine
/// busy with other work; the bench then measures in it, as before).
pub(crate) fn settle() {
    let deadline = Instant::now() + SETTLE_BUDGET;
    while Instant::now() < deadline {
        let Some(before) = cpu_times() else { return };
        std::thread::sleep(SETTLE_WINDOW);
        let Some(after) = cpu_times() else { return };
        let (busy, total) = (after.0 - before.0, after.1 - before.1);
        if total > 0 && busy * 10 <= total {
            return;
        }
    }
}

/// The busy and total CPU time of every core, in clock ticks, from `/proc/stat`.
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The distribution of one variant's call durations, in µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stats {
    pub(crate) median: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
}

impl Stats {
    pub(crate) fn of(samples: &[f64]) -> Stats {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Stats {
            median: percentile(&sorted, 0.50),
            p90: percentile(&sorted, 0.90),
            p99: percentile(&sorted, 0.99),
        }
    }
}

/// Linear interpolation between the closest ranks of `sorted` (numpy's default method).
fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let Some(&last) = sorted.last() else {
        return f64::NAN;
    };
    let rank = fraction * (sorted.len() - 1) as f64;
    let below = rank.floor() as usize;
    let Some(&above_value) = sorted.get(below + 1) else {
        return last;
    };
    sorted[below] + (above_value - sorted[below]) * (rank - below as f64)
}

/// A markdown table: the first `n_text_columns` columns left-aligned, the rest (numbers)
/// right-aligned.
pub(crate) fn render_table<const N: usize>(
    header: &[String],
    rows: &[[String; N]],
    n_text_columns: usize,
) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            rows.iter()
                .map(|cells| cells[column].chars().count())
                .chain([header[column].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let render_line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(column, (cell, &width))| {
                if column < n_text_columns {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        format!("| {} |", padded.join(" | "))
    };
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(column, &width)| {
            if column < n_text_columns {
                "-".repeat(width)
            } else {
                format!("{}:", "-".repeat(width.saturating_sub(1)))
            }
        })
        .collect();
    let mut table = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(table, "{}", render_line(header));
    let _ = writeln!(table, "| {} |", rule.join(" | "));
    for cells in rows {
        let _ = writeln!(table, "{}", render_line(cells));
    }
    table
}

/// The median of `samples` (sorted in place); NaN when there is none.
pub(crate) fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    match samples.len() {
        0 => f64::NAN,
        n_samples if n_samples % 2 == 1 => samples[n_samples / 2],
        n_samples => (samples[n_samples / 2 - 1] + samples[n_samples / 2]) / 2.0,
    }
}

/// `uname -srm`, read with the system call rather than by spawning `uname`.
pub(crate) fn kernel_release() -> String {
    // SAFETY: `utsname` is plain old data for which all-zero bytes are valid.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid, writable `utsname`.
    if unsafe { libc::uname(&mut name) } != 0 {
        return "unknown".to_owned();
    }
    let field = |chars: &[libc::c_char]| {
        // SAFETY: uname fills each field with a NUL-terminated string within its array.
        unsafe { std::ffi::CStr::from_ptr(chars.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    format!(
        "{} {} {}",
        field(&name.sysname),
        field(&name.release),
        field(&name.machine)
    )
}

#[cfg(test)]
mod tests {
    use crate::measure::{Stats, median, percentile};

    fn check_stats(samples: &[f64], expect: (f64, f64, f64)) {
        let stats = Stats::of(samples);
        assert_eq!(
            (stats.median, stats.p90, stats.p99),
            expect,
            "samples: {samples:?}"
        );
    }

    #[test]
    fn stats() {
        check_stats(&[5.0], (5.0, 5.0, 5.0));
        check_stats(&[3.0, 1.0], (2.0, 2.8, 2.98));
        check_stats(&[4.0, 1.0, 3.0, 2.0, 5.0], (3.0, 4.6, 4.96));
        let hundred_and_one: Vec<f64> = (0..=100).rev().map(f64::from).collect();
        check_stats(&hundred_and_one, (50.0, 90.0, 99.0));
        assert!(percentile(&[], 0.5).is_nan());
    }

    fn check_median(samples: &[f64], expect: f64) {
        let mut samples = samples.to_vec();
        assert_eq!(median(&mut samples), expect, "{samples:?}");
    }

    #[test]
    fn medians() {
        check_median(&[3.0], 3.0);
        check_median(&[4.0, 1.0, 3.0], 3.0);
        check_median(&[4.0, 1.0, 3.0, 2.0], 2.5);
    }
}
