//! Go-style durations (`30s`, `5m`, `1h30m`, `500ms`, `1.5h`), the format of the `timeout` a Kodelet tool's `config` subcommand asks for.
//!
//! The grammar is Go's `time.ParseDuration`: one or more decimal numbers,
//! each with an optional fraction and a unit (`ns`, `us`/`µs`, `ms`, `s`,
//! `m`, `h`). Go also accepts a sign and a bare `0`; a requested timeout must
//! be positive, so those are refused here with a reason.

use std::time::Duration;

/// Why a text is not a positive Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is empty.
    #[error("a duration cannot be empty")]
    Empty,
    /// A number has no unit, e.g. `30`.
    #[error("`{text}` lacks a unit after a number (units: ns, us, ms, s, m, h)")]
    MissingUnit {
        /// The whole text.
        text: String,
    },
    /// A unit is not one of Go's.
    #[error("`{text}` has unknown unit `{unit}` (units: ns, us, ms, s, m, h)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// Something other than a number was found where one was expected.
    #[error("`{text}` is not a duration such as `30s`, `5m` or `1h30m`")]
    Malformed {
        /// The whole text.
        text: String,
    },
    /// The duration is zero or negative.
    #[error("`{text}` is not a positive duration")]
    NotPositive {
        /// The whole text.
        text: String,
    },
    /// The duration does not fit.
    #[error("`{text}` is too long a duration")]
    Overflow {
        /// The whole text.
        text: String,
    },
}

/// Parses a positive Go duration.
pub(crate) fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let malformed = || DurationError::Malformed {
        text: text.to_owned(),
    };
    let overflow = || DurationError::Overflow {
        text: text.to_owned(),
    };
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let (negative, mut rest) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Err(DurationError::NotPositive {
            text: text.to_owned(),
        });
    }
    if rest.is_empty() {
        return Err(malformed());
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|character: char| !(character.is_ascii_digit() || character == '.'))
            .unwrap_or(rest.len());
        let (number, after_number) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(malformed());
        }
        let unit_len = after_number
            .find(|character: char| character.is_ascii_digit() || character == '.')
            .unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "" => {
                return Err(DurationError::MissingUnit {
                    text: text.to_owned(),
                });
            }
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            other => {
                return Err(DurationError::UnknownUnit {
                    text: text.to_owned(),
                    unit: other.to_owned(),
                });
            }
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| overflow())?
        };
        let mut nanos = whole.checked_mul(unit_nanos).ok_or_else(overflow)?;
        // The fraction is scaled digit by digit, like Go, so that `1.5h` is exact.
        let mut scale = unit_nanos;
        for digit in fraction.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            nanos += u128::from(digit - b'0') * scale;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(overflow)?;
        rest = after_unit;
    }
    if negative || total_nanos == 0 {
        return Err(DurationError::NotPositive {
            text: text.to_owned(),
        });
    }
    let seconds = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| overflow())?;
    let subsec_nanos = u32::try_from(total_nanos % 1_000_000_000)
        .expect("the remainder of a division by 10^9 fits in u32");
    Ok(Duration::new(seconds, subsec_nanos))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::formats::kodelet::go_duration::parse_go_duration;

    fn check(text: &str, expect: Result<Duration, &str>) {
        let actual = parse_go_duration(text).map_err(|error| error.to_string());
        assert_eq!(actual, expect.map_err(str::to_owned), "{text:?}");
    }

    #[test]
    fn single_units() {
        check("30s", Ok(Duration::from_secs(30)));
        check("5m", Ok(Duration::from_secs(300)));
        check("2h", Ok(Duration::from_secs(7200)));
        check("500ms", Ok(Duration::from_millis(500)));
        check("250us", Ok(Duration::from_micros(250)));
        check("250µs", Ok(Duration::from_micros(250)));
        check("7ns", Ok(Duration::from_nanos(7)));
    }

    #[test]
    fn compound_and_fractions() {
        check("1h30m", Ok(Duration::from_secs(5400)));
        check("1m30.5s", Ok(Duration::from_millis(90_500)));
        check("1.5h", Ok(Duration::from_secs(5400)));
        check(".5s", Ok(Duration::from_millis(500)));
        check("+10s", Ok(Duration::from_secs(10)));
    }

    #[test]
    fn refused() {
        check("", Err("a duration cannot be empty"));
        check(
            "30",
            Err("`30` lacks a unit after a number (units: ns, us, ms, s, m, h)"),
        );
        check(
            "5 minutes",
            Err("`5 minutes` has unknown unit ` minutes` (units: ns, us, ms, s, m, h)"),
        );
        check(
            "3d",
            Err("`3d` has unknown unit `d` (units: ns, us, ms, s, m, h)"),
        );
        check(
            "s",
            Err("`s` is not a duration such as `30s`, `5m` or `1h30m`"),
        );
        check(
            "1.2.3s",
            Err("`1.2.3s` is not a duration such as `30s`, `5m` or `1h30m`"),
        );
        check(
            "-",
            Err("`-` is not a duration such as `30s`, `5m` or `1h30m`"),
        );
    }

    #[test]
    fn not_positive() {
        check("0", Err("`0` is not a positive duration"));
        check("0s", Err("`0s` is not a positive duration"));
        check("-5s", Err("`-5s` is not a positive duration"));
    }

    #[test]
    fn overflow() {
        check(
            "99999999999999999999999999999999999999999h",
            Err("`99999999999999999999999999999999999999999h` is too long a duration"),
        );
    }
}
