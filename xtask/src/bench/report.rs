//! The report of the per-call section of `cargo xtask bench`: the table of every variant and
//! the line that holds the default profile to the strictest (issue 23, acceptance 6).

use std::fmt::Write as _;

use super::{BenchSettings, DEFAULT_PROFILE, Harness, MachineFacts, PROGRAM, Row, Variant};
use crate::measure::render_table;
use crate::mechanisms::MECHANISMS;

pub(super) fn render_report(
    harness: &Harness,
    settings: &BenchSettings,
    facts: &MachineFacts,
    rows: &[Row],
) -> String {
    let mut report = String::new();
    let backend = harness.executor.backend();
    // Writing to a String cannot fail.
    let _ = writeln!(report, "toolsmith spawn bench: `{PROGRAM}` per call, µs");
    let _ = writeln!(
        report,
        "executor: toolsmith_executor::Executor::run, backend {backend}, Limits::recommended()"
    );
    let _ = writeln!(
        report,
        "machine: {} cpus, {}, {}",
        facts.n_cpus, facts.kernel, facts.cpu_model
    );
    let _ = writeln!(
        report,
        "method: {} warm-ups per variant, then {} interleaved rounds; ratio = median / median of the baseline with the same parent",
        settings.warmups, settings.rounds
    );
    let _ = writeln!(report);
    let header = [
        "variant",
        "parent",
        "parent RSS",
        "calls",
        "median µs",
        "p90 µs",
        "p99 µs",
        "ratio",
        "share µs",
    ];
    let median_of = |variant: Variant, parent: &str| {
        rows.iter()
            .find(|other| other.parent == parent && other.variant == variant)
            .map_or(f64::NAN, |other| other.stats.median)
    };
    let mut table: Vec<[String; 9]> = Vec::new();
    for row in rows {
        let baseline = median_of(row.variant.baseline(), row.parent);
        // What this mechanism adds to the ones above it.
        let share = row
            .variant
            .previous_layer()
            .map(|previous| format!("{:+.1}", row.stats.median - median_of(previous, row.parent)))
            .unwrap_or_default();
        table.push([
            row.variant.label().to_owned(),
            row.parent.to_owned(),
            format!("{} MiB", row.parent_rss_mib),
            row.calls.to_string(),
            format!("{:.1}", row.stats.median),
            format!("{:.1}", row.stats.p90),
            format!("{:.1}", row.stats.p99),
            format!("{:.2}", row.stats.median / baseline),
            share,
        ]);
    }
    let header: Vec<String> = header.iter().map(|cell| (*cell).to_owned()).collect();
    report.push_str(&render_table(&header, &table, 2));
    report.push_str(&default_against_strictest(rows));
    report
}

/// How far above the strictest profile the default may measure and still be called equal:
/// the spread of one variant's median between two runs of this bench on a loaded machine.
const WITHIN_NOISE: f64 = 1.05;

/// Issue 23's first half of acceptance 6: the default profile's prepared per-call cost over
/// the strictest's, per parent, back to back and apart.
fn default_against_strictest(rows: &[Row]) -> String {
    let median_of = |variant: Variant, parent: &str| {
        rows.iter()
            .find(|row| row.parent == parent && row.variant == variant)
            .map(|row| row.stats.median)
    };
    let strictest = MECHANISMS.len();
    let mut report = String::new();
    for (label, default, strict) in [
        (
            "default / strictest (prepared)",
            Variant::Prepared(DEFAULT_PROFILE),
            Variant::Prepared(strictest),
        ),
        (
            "default / strictest (prepared, calls 10 ms apart)",
            Variant::PreparedApart(DEFAULT_PROFILE),
            Variant::PreparedApart(strictest),
        ),
    ] {
        let mut ratios = Vec::new();
        for parent in ["small", "1 GiB"] {
            if let (Some(default), Some(strict)) =
                (median_of(default, parent), median_of(strict, parent))
            {
                ratios.push((parent, default / strict));
            }
        }
        let shown: Vec<String> = ratios
            .iter()
            .map(|(parent, ratio)| format!("{ratio:.2} ({parent} parent)"))
            .collect();
        let worst = ratios.iter().map(|(_, ratio)| *ratio).fold(0.0, f64::max);
        let verdict = if worst <= 1.0 {
            "met"
        } else if worst <= WITHIN_NOISE {
            "met within noise"
        } else {
            "NOT met"
        };
        let _ = writeln!(
            report,
            "{label}: {}, target <= 1.0 (within noise, {WITHIN_NOISE}): {verdict}",
            shown.join(", ")
        );
    }
    report
}
