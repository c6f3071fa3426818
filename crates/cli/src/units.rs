//! Human units for durations (`500ms`, `30s`, `2m`) and sizes (`64KiB`, `10MB`), parsed from flags, env and config and printed back.
//!
//! A plain number is seconds for a duration and bytes for a size.
//! Duration units: `ms`, `s`, `m`, `h`.
//! Size units: `B`; `KB`, `MB`, `GB` (powers of 1000); `KiB`, `MiB`, `GiB` (powers of 1024); `K`, `M`, `G` mean the binary ones.
//! A decimal point is allowed (`1.5s`, `0.5GiB`), and space between number and unit is ignored.
//! Optional limits also accept `unlimited`.

use std::fmt;
use std::time::Duration;

/// A limit that can also be switched off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap<T> {
    /// No limit.
    Unlimited,
    /// This limit.
    At(T),
}

impl<T> Cap<T> {
    pub(crate) fn into_option(self) -> Option<T> {
        match self {
            Cap::Unlimited => None,
            Cap::At(value) => Some(value),
        }
    }
}

/// The word that switches an optional limit off.
const UNLIMITED: &str = "unlimited";

/// Why a value is not a duration or a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnitError {
    expected: &'static str,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {}", self.expected)
    }
}

impl std::error::Error for UnitError {}

const DURATION_EXPECTED: &str =
    "a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)";
const SIZE_EXPECTED: &str =
    "a size such as `64KiB`, `512MiB`, `1GiB` or `10MB` (a plain number is bytes)";
const COUNT_EXPECTED: &str = "a whole number";

/// Splits `text` into its number and its unit.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text
        .find(|character: char| !(character.is_ascii_digit() || character == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return None;
    }
    let number: f64 = number.parse().ok()?;
    Some((number, unit.trim()))
}

/// Parses a duration: `500ms`, `30s`, `1.5s`, `2m`, `1h`, or `30` (seconds).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let error = UnitError {
        expected: DURATION_EXPECTED,
    };
    let (number, unit) = split_number(text).ok_or(error.clone())?;
    let seconds_per_unit = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(error),
    };
    Duration::try_from_secs_f64(number * seconds_per_unit).map_err(|_| error)
}

/// Parses a size in bytes: `64KiB`, `512MiB`, `10MB`, or `4096` (bytes).
pub(crate) fn parse_size(text: &str) -> Result<u64, UnitError> {
    let error = UnitError {
        expected: SIZE_EXPECTED,
    };
    let (number, unit) = split_number(text).ok_or(error.clone())?;
    let multiplier: u64 = match unit {
        "" | "B" => 1,
        "KB" => 1000,
        "MB" => 1000 * 1000,
        "GB" => 1000 * 1000 * 1000,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        _ => return Err(error),
    };
    let bytes = (number * multiplier as f64).round();
    if !(0.0..=u64::MAX as f64).contains(&bytes) {
        return Err(error);
    }
    Ok(bytes as u64)
}

/// Parses a count, such as a number of processes.
pub(crate) fn parse_count(text: &str) -> Result<u64, UnitError> {
    text.trim().parse().map_err(|_| UnitError {
        expected: COUNT_EXPECTED,
    })
}

/// Parses `unlimited` or a value with `parse`.
pub(crate) fn parse_cap<T>(
    text: &str,
    parse: fn(&str) -> Result<T, UnitError>,
) -> Result<Cap<T>, UnitError> {
    if text.trim() == UNLIMITED {
        return Ok(Cap::Unlimited);
    }
    parse(text).map(Cap::At)
}

/// Prints a size in the largest binary unit that keeps it whole: `1GiB`, `64KiB`, `1000B`.
pub(crate) fn format_size(bytes: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use toolsmith_registry::format_duration;

    use crate::units::{Cap, format_size, parse_cap, parse_duration, parse_size};

    fn check<T: PartialEq + std::fmt::Debug>(
        parse: fn(&str) -> Result<T, crate::units::UnitError>,
        input: &str,
        expect: Option<T>,
    ) {
        assert_eq!(parse(input).ok(), expect, "{input:?}");
    }

    #[test]
    fn durations() {
        check(parse_duration, "30s", Some(Duration::from_secs(30)));
        check(parse_duration, "30", Some(Duration::from_secs(30)));
        check(parse_duration, "500ms", Some(Duration::from_millis(500)));
        check(parse_duration, "2m", Some(Duration::from_secs(120)));
        check(parse_duration, "1h", Some(Duration::from_secs(3600)));
        check(parse_duration, "1.5s", Some(Duration::from_millis(1500)));
        check(parse_duration, " 2 s ", Some(Duration::from_secs(2)));
    }

    #[test]
    fn bad_durations() {
        check(parse_duration, "5 parsecs", None);
        check(parse_duration, "", None);
        check(parse_duration, "s", None);
        check(parse_duration, "-1s", None);
        check(parse_duration, "1.s", None);
    }

    #[test]
    fn sizes() {
        check(parse_size, "512MiB", Some(512 << 20));
        check(parse_size, "1GiB", Some(1 << 30));
        check(parse_size, "64KiB", Some(64 << 10));
        check(parse_size, "10MB", Some(10_000_000));
        check(parse_size, "4096", Some(4096));
        check(parse_size, "1.5K", Some(1536));
        check(parse_size, "12 B", Some(12));
    }

    #[test]
    fn bad_sizes() {
        check(parse_size, "lots", None);
        check(parse_size, "10 parsecs", None);
        check(parse_size, "1TiB", None);
    }

    #[test]
    fn caps() {
        check(
            |text| parse_cap(text, parse_size),
            "unlimited",
            Some(Cap::Unlimited),
        );
        check(
            |text| parse_cap(text, parse_size),
            "1KiB",
            Some(Cap::At(1024)),
        );
    }

    #[test]
    fn error_message() {
        assert_eq!(
            parse_duration("5 parsecs").unwrap_err().to_string(),
            "expected a duration such as `500ms`, `30s`, `2m` or `1h` (a plain number is seconds)"
        );
    }

    #[test]
    fn formatting_round_trips() {
        for text in ["2m", "30s", "500ms", "1h", "0s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
        for text in ["1GiB", "64KiB", "1000B", "3MiB"] {
            assert_eq!(format_size(parse_size(text).unwrap()), text);
        }
    }
}
