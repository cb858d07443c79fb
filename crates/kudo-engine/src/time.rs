//! Time values the engine needs without reading a clock: an RFC 3339 instant (what Kubernetes
//! stores in `metav1.Time` fields) and Go-style durations (what our `timeout` fields hold).
//!
//! The engine never calls `SystemTime::now()`: the caller passes `now` in, which keeps every
//! decision reproducible in tests and lets the controller use one instant for a whole reconcile.

use std::fmt;

use thiserror::Error;

/// Parse failures for timestamps and durations; the message names the offending input so that it
/// can be surfaced verbatim in a step/plan message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TimeError {
    /// The string is not an RFC 3339 timestamp (holds it).
    #[error("invalid RFC 3339 timestamp {0:?}")]
    Timestamp(String),
    /// Not a usable timeout: no Go-style duration or bare seconds, or negative (holds it).
    #[error("invalid duration {0:?}: expected a Go-style duration such as \"30s\", \"10m\" or \"1h30m\"")]
    Duration(String),
}

/// A UTC instant with second precision (Kubernetes serialises `metav1.Time` with seconds only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    secs: i64,
}

impl Timestamp {
    /// Seconds since the Unix epoch.
    pub fn from_unix(secs: i64) -> Timestamp {
        Timestamp { secs }
    }

    /// Seconds since the Unix epoch.
    pub fn unix(self) -> i64 {
        self.secs
    }

    /// Accepts `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (also a lowercase `t`/`z` or a space as the
    /// separator, as RFC 3339 allows). Fractions are truncated.
    pub fn parse(s: &str) -> Result<Timestamp, TimeError> {
        let err = || TimeError::Timestamp(s.to_string());
        let b = s.as_bytes();
        if b.len() < 20 {
            return Err(err());
        }
        let num = |from: usize, len: usize| -> Result<i64, TimeError> {
            let part = s.get(from..from + len).ok_or_else(err)?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(err());
            }
            part.parse::<i64>().map_err(|_| err())
        };
        if b[4] != b'-'
            || b[7] != b'-'
            || !matches!(b[10], b'T' | b't' | b' ')
            || b[13] != b':'
            || b[16] != b':'
        {
            return Err(err());
        }
        let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
        let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return Err(err());
        }
        let mut i = 19;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == start {
                return Err(err());
            }
        }
        let offset = match b.get(i) {
            Some(b'Z' | b'z') if i + 1 == b.len() => 0,
            Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
                let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
                if oh > 23 || om > 59 {
                    return Err(err());
                }
                let off = oh * 3600 + om * 60;
                if *sign == b'+' { off } else { -off }
            }
            _ => return Err(err()),
        };
        let days = days_from_civil(year, month, day);
        Ok(Timestamp {
            secs: days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        })
    }

    /// Seconds elapsed from `earlier` to `self` (negative when `earlier` is later).
    pub fn seconds_since(self, earlier: Timestamp) -> i64 {
        self.secs.saturating_sub(earlier.secs)
    }

    /// The instant `secs` seconds later (saturating at the largest representable instant).
    pub fn plus_seconds(self, secs: u64) -> Timestamp {
        Timestamp {
            secs: self.secs.saturating_add(i64::try_from(secs).unwrap_or(i64::MAX)),
        }
    }
}

/// Formats as `YYYY-MM-DDTHH:MM:SSZ`, the form the API server writes for `metav1.Time`.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.secs.div_euclid(86_400);
        let rem = self.secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60
        )
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Timestamp::parse(s)
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

// Howard Hinnant's days-from-civil algorithm (public domain arithmetic).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// A `timeout`: a Go duration ([`kudo_api::duration::parse`]) in whole seconds. The rules on top
/// of Go's are the engine's: sub-second parts round up, so a timeout is never shorter than
/// written; negative durations are refused, a timeout cannot be negative; surrounding whitespace
/// is ignored; and a bare non-negative integer is read as seconds (the kudo-api field
/// documentation describes the timeout in seconds; Go itself accepts only `0` without a unit).
pub fn parse_duration(s: &str) -> Result<u64, TimeError> {
    let err = || TimeError::Duration(s.to_string());
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) {
        return t.parse::<u64>().map_err(|_| err());
    }
    if t.starts_with('-') {
        return Err(err());
    }
    let nanos = kudo_api::duration::parse(t).map_err(|_| err())?;
    Ok(u64::try_from(nanos).map_err(|_| err())?.div_ceil(1_000_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_rfc3339() {
        let t = Timestamp::parse("2019-10-17T01:01:01Z").unwrap();
        assert_eq!(t.unix(), 1_571_274_061);
        assert_eq!(t.to_string(), "2019-10-17T01:01:01Z");
        assert_eq!(Timestamp::parse("2019-10-17T03:01:01.999+02:00").unwrap(), t);
        assert_eq!(Timestamp::parse("1970-01-01T00:00:00Z").unwrap().unix(), 0);
        assert_eq!(
            Timestamp::parse("2000-02-29T00:00:00Z").unwrap().to_string(),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(Timestamp::from_unix(-1).to_string(), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn rejects_bad_timestamps() {
        for bad in [
            "",
            "2019-10-17",
            "2019-13-01T00:00:00Z",
            "2019-02-30T00:00:00Z",
            "2019-10-17T01:01:01",
            "2019-10-17T01:01:01+0200",
            "x019-10-17T01:01:01Z",
            "2019-10-17T01:01:01.Z",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("30s").unwrap(), 30);
        assert_eq!(parse_duration("10m").unwrap(), 600);
        assert_eq!(parse_duration("1h30m").unwrap(), 5400);
        assert_eq!(parse_duration("1.5h").unwrap(), 5400);
        assert_eq!(parse_duration("1m0.5s").unwrap(), 61);
        assert_eq!(parse_duration("300ms").unwrap(), 1);
        assert_eq!(parse_duration("0").unwrap(), 0);
        assert_eq!(parse_duration("45").unwrap(), 45);
        assert_eq!(parse_duration("2h45m10s").unwrap(), 9910);
        assert_eq!(parse_duration(" +5s ").unwrap(), 5);
        assert_eq!(parse_duration("1ns").unwrap(), 1);
        for bad in ["", "-5s", "-0", "10x", "m", "1h m", ".s", "5d", "1.5", "3000000h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
