//! Go's `time.ParseDuration`, the one parser of Go durations in the workspace.
//!
//! KUDO's users write durations the way Go reads them (`timeout: 10m`, `@every 1h30m`, Sprig's
//! `dateModify "-1.5h"`, autopilot's `for: 30s`), so every place that reads one must accept and
//! refuse exactly what Go does. This module does only that and returns nanoseconds; each caller
//! states its own rules on top (rounding to seconds, a minimum, a bare integer meaning seconds,
//! no negative values) where it calls [`parse`], so the rules stay visible at the call site.
//!
//! It lives in `kudo-api`, the crate with no workspace dependencies, because its callers span
//! both halves of the workspace (the template engine, the KUDO engine, the embedded API server
//! and the CLI).

use thiserror::Error;

use crate::strconv::go_quote;

/// Why Go would refuse a duration. `Display` is Go's own error text, so messages read the same as
/// KUDO's (`time: invalid duration "1x"` and so on).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    /// Not a duration at all, or out of the `int64` nanosecond range.
    #[error("time: invalid duration {}", go_quote(.0))]
    Invalid(String),
    /// A number without a unit (other than a lone `0`).
    #[error("time: missing unit in duration {}", go_quote(.0))]
    MissingUnit(String),
    /// A unit Go does not know.
    #[error("time: unknown unit {} in duration {}", go_quote(.unit), go_quote(.input))]
    UnknownUnit {
        /// The unit as written, e.g. `x` in `1x`.
        unit: String,
        /// The whole duration string that was being parsed.
        input: String,
    },
}

/// Nanoseconds per unit, as in Go's `unitMap` (both the micro sign U+00B5 and the Greek mu U+03BC
/// spell microseconds).
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// `1 << 63`: Go accumulates magnitudes in a `uint64` and allows this much before the sign is
/// applied, so `-2562047h47m16.854775808s` (`math.MinInt64` ns) parses.
const LIMIT: u64 = 1 << 63;

/// Parses `s` as Go's `time.ParseDuration` does: an optional sign, then a lone `0` or one or more
/// decimal numbers (optional fraction) each followed by a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`,
/// `h`). Returns signed nanoseconds. No whitespace is accepted; callers trim if they want to.
pub fn parse(s: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(s.to_string());
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let (nanos, after) = component(rest, s)?;
        total = total
            .checked_add(nanos)
            .filter(|t| *t <= LIMIT)
            .ok_or_else(invalid)?;
        rest = after;
    }
    if neg {
        // `total <= 1 << 63`, so the negation fits (`1 << 63` itself is `i64::MIN`).
        return Ok((total as i64).wrapping_neg());
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// One `<number><unit>` at the start of `rest`: its magnitude in nanoseconds and what follows.
/// `input` is the whole string, for the error messages.
fn component<'a>(rest: &'a str, input: &str) -> Result<(u64, &'a str), DurationError> {
    let invalid = || DurationError::Invalid(input.to_string());
    if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
        return Err(invalid());
    }
    let int_len = digits(rest);
    let whole = leading_int(&rest[..int_len]).ok_or_else(invalid)?;
    let mut rest = &rest[int_len..];
    let (mut fraction, mut frac_len) = ((0, 1.0), 0);
    if let Some(after_dot) = rest.strip_prefix('.') {
        frac_len = digits(after_dot);
        fraction = leading_fraction(&after_dot[..frac_len]);
        rest = &after_dot[frac_len..];
    }
    if int_len == 0 && frac_len == 0 {
        // Go wants digits before or after the dot: `.s` and `.` are invalid.
        return Err(invalid());
    }
    let unit_len = rest
        .find(|c: char| c == '.' || c.is_ascii_digit())
        .unwrap_or(rest.len());
    if unit_len == 0 {
        return Err(DurationError::MissingUnit(input.to_string()));
    }
    let unit = &rest[..unit_len];
    let per_unit = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
        unit: unit.to_string(),
        input: input.to_string(),
    })?;
    if whole > LIMIT / per_unit {
        return Err(invalid());
    }
    let mut nanos = whole * per_unit;
    let (f, scale) = fraction;
    if f > 0 {
        // Go computes the fractional part in float64 and truncates; do the same so that results
        // agree to the nanosecond.
        nanos += (f as f64 * (per_unit as f64 / scale)) as u64;
        if nanos > LIMIT {
            return Err(invalid());
        }
    }
    Ok((nanos, &rest[unit_len..]))
}

/// How many ASCII digits `s` starts with.
fn digits(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// Go's `leadingInt`: the value of a run of digits, `None` once it exceeds `1 << 63`.
fn leading_int(digits: &str) -> Option<u64> {
    digits.bytes().try_fold(0u64, |x, c| {
        let x = x.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        (x <= LIMIT).then_some(x)
    })
}

/// Go's `leadingFraction`: the digits after the dot as an integer and the power of ten that
/// scales it, ignoring digits once more would overflow (they are below a nanosecond anyway).
fn leading_fraction(digits: &str) -> (u64, f64) {
    let mut x: u64 = 0;
    let mut scale = 1.0f64;
    for c in digits.bytes() {
        match x.checked_mul(10).map(|y| y + u64::from(c - b'0')) {
            Some(y) if x <= (LIMIT - 1) / 10 && y <= LIMIT => {
                x = y;
                scale *= 10.0;
            }
            _ => break,
        }
    }
    (x, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// Go's own table (`time_test.go`'s parseDurationTests) and the issue's examples.
    #[test]
    fn accepts_what_go_accepts() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12\u{b5}s", 12 * US),
            ("12\u{3bc}s", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("1h30m", H + 30 * M),
            ("1.5s", 1500 * MS),
            ("300ms", 300 * MS),
            ("-2m", -2 * M),
            ("1h2m3.5s", H + 2 * M + 3 * S + 500 * MS),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000 * NS),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827 * NS),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn refuses_what_go_refuses_with_gos_words() {
        let cases: &[(&str, &str)] = &[
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("1", r#"time: missing unit in duration "1""#),
            ("-", r#"time: invalid duration "-""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1x", r#"time: unknown unit "x" in duration "1x""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("1h m", r#"time: unknown unit "h m" in duration "1h m""#),
            (" 1s", r#"time: invalid duration " 1s""#),
            ("1s ", r#"time: unknown unit "s " in duration "1s ""#),
            ("+-5s", r#"time: invalid duration "+-5s""#),
            ("1.2.3s", r#"time: missing unit in duration "1.2.3s""#),
            ("1\ts", "time: unknown unit \"\\ts\" in duration \"1\\ts\""),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            (
                "9223372036854ms775us808ns",
                r#"time: invalid duration "9223372036854ms775us808ns""#,
            ),
            (
                "-9223372036854775809ns",
                r#"time: invalid duration "-9223372036854775809ns""#,
            ),
            ("3000000h", r#"time: invalid duration "3000000h""#),
            (
                "99999999999999999999s",
                r#"time: invalid duration "99999999999999999999s""#,
            ),
        ];
        for (input, want) in cases {
            let got = parse(input).expect_err(input);
            assert_eq!(got.to_string(), *want, "{input}");
        }
    }
}
