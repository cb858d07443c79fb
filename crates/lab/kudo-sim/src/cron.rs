//! A small parser and evaluator for the standard 5-field cron syntax used by CronJob
//! `spec.schedule` (minute hour day-of-month month day-of-week), interpreted in UTC.
//!
//! Supported: `*`, `?` (same as `*`), numbers, ranges `a-b`, steps `*/n`, `a-b/n`, `a/n`, lists,
//! month and weekday names (`JAN`..`DEC`, `SUN`..`SAT`, case-insensitive), 7 as Sunday, and the
//! macros `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`.
//! As in Vixie cron (and the Go library Kubernetes uses), when both day-of-month and
//! day-of-week are restricted a day matches if *either* matches.

use crate::util::{civil_from_days, days_from_civil};

/// Why a schedule could not be parsed; reported as a CronJob warning event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The schedule does not have exactly five fields (or a known `@` macro).
    #[error("expected 5 fields (minute hour day-of-month month day-of-week), got {0}")]
    FieldCount(usize),
    /// A field contains something that is not a number, name, range, step or list.
    #[error("invalid {field} field {value:?}")]
    Field {
        /// Which field (`minute`, `hour`, `day-of-month`, `month` or `day-of-week`).
        field: &'static str,
        /// The offending text: the field as written, or the value within it that is invalid.
        value: String,
    },
    /// `TZ=`/`CRON_TZ=` prefixes are rejected by Kubernetes too (use `spec.timeZone`).
    #[error("time zone prefixes are not supported in schedules; use spec.timeZone")]
    TimeZonePrefix,
}

/// A parsed schedule: one bit set per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    doms: u64,
    months: u64,
    dows: u64,
    dom_star: bool,
    dow_star: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Schedule {
    /// Parses a 5-field cron expression or macro.
    pub fn parse(expr: &str) -> Result<Schedule, CronError> {
        let expr = expr.trim();
        if expr.starts_with("TZ=") || expr.starts_with("CRON_TZ=") {
            return Err(CronError::TimeZonePrefix);
        }
        let expanded = match expr.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_string(),
            "@monthly" => "0 0 1 * *".to_string(),
            "@weekly" => "0 0 * * 0".to_string(),
            "@daily" | "@midnight" => "0 0 * * *".to_string(),
            "@hourly" => "0 * * * *".to_string(),
            _ => expr.to_string(),
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(CronError::FieldCount(fields.len()));
        }
        let minutes = parse_field(fields[0], "minute", 0, 59, &[])?;
        let hours = parse_field(fields[1], "hour", 0, 23, &[])?;
        let doms = parse_field(fields[2], "day-of-month", 1, 31, &[])?;
        let months = parse_field(fields[3], "month", 1, 12, &MONTHS)?;
        let mut dows = parse_field(fields[4], "day-of-week", 0, 7, &DAYS)?;
        if dows & (1 << 7) != 0 {
            dows = (dows | 1) & !(1 << 7);
        }
        Ok(Schedule {
            minutes,
            hours,
            doms,
            months,
            dows,
            dom_star: is_star(fields[2]),
            dow_star: is_star(fields[4]),
        })
    }

    fn day_matches(&self, days: i64) -> bool {
        let (_, m, d) = civil_from_days(days);
        if self.months & (1 << m) == 0 {
            return false;
        }
        // 1970-01-01 was a Thursday (4).
        let dow = (days + 4).rem_euclid(7);
        let dom_ok = self.doms & (1 << d) != 0;
        let dow_ok = self.dows & (1 << dow) != 0;
        if self.dom_star || self.dow_star {
            dom_ok && dow_ok
        } else {
            dom_ok || dow_ok
        }
    }

    /// Whether the schedule fires at the given minute (minutes since the Unix epoch, UTC).
    pub fn matches_minute(&self, minute: i64) -> bool {
        let days = minute.div_euclid(1440);
        let m = minute.rem_euclid(1440);
        self.day_matches(days) && self.hours & (1 << (m / 60)) != 0 && self.minutes & (1 << (m % 60)) != 0
    }

    /// The latest firing time (ms since epoch, on a minute boundary) that is `> after_ms` and
    /// `<= now_ms`, i.e. the most recent missed run, like the CronJob controller which only starts
    /// the latest of several missed schedules.
    pub fn latest_between(&self, after_ms: i64, now_ms: i64) -> Option<i64> {
        if now_ms <= after_ms {
            return None;
        }
        let lowest = after_ms.div_euclid(60_000) + 1;
        let mut minute = now_ms.div_euclid(60_000);
        while minute >= lowest {
            let days = minute.div_euclid(1440);
            if !self.day_matches(days) {
                minute = days * 1440 - 1;
                continue;
            }
            let m = minute.rem_euclid(1440);
            if self.hours & (1 << (m / 60)) == 0 {
                minute = days * 1440 + (m / 60) * 60 - 1;
                continue;
            }
            if self.minutes & (1 << (m % 60)) != 0 {
                return Some(minute * 60_000);
            }
            minute -= 1;
        }
        None
    }

    /// The next firing time strictly after `after_ms` (ms since epoch), searching at most about
    /// eight years ahead (enough for `0 0 29 2 *`); `None` for schedules that never fire
    /// (such as `0 0 31 2 *`).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let mut minute = after_ms.div_euclid(60_000) + 1;
        let limit_days = minute.div_euclid(1440) + 8 * 366;
        loop {
            let days = minute.div_euclid(1440);
            if days > limit_days {
                return None;
            }
            if !self.day_matches(days) {
                minute = (days + 1) * 1440;
                continue;
            }
            let m = minute.rem_euclid(1440);
            if self.hours & (1 << (m / 60)) == 0 {
                minute = days * 1440 + (m / 60 + 1) * 60;
                continue;
            }
            if self.minutes & (1 << (m % 60)) != 0 {
                return Some(minute * 60_000);
            }
            minute += 1;
        }
    }
}

/// A field starting with `*` or `?` (including `*/n`) counts as unrestricted for the
/// day-of-month/day-of-week OR rule, as in the Go cron library Kubernetes uses.
fn is_star(f: &str) -> bool {
    f.starts_with('*') || f.starts_with('?')
}

fn parse_value(s: &str, field: &'static str, names: &[&str]) -> Result<u32, CronError> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    let lower = s.to_ascii_lowercase();
    names
        .iter()
        .position(|n| *n == lower)
        .map(|i| {
            // Months are 1-based, weekdays 0-based.
            if names.len() == 12 { i as u32 + 1 } else { i as u32 }
        })
        .ok_or_else(|| CronError::Field {
            field,
            value: s.to_string(),
        })
}

fn parse_field(f: &str, field: &'static str, min: u32, max: u32, names: &[&str]) -> Result<u64, CronError> {
    let err = || CronError::Field {
        field,
        value: f.to_string(),
    };
    let mut bits = 0u64;
    for part in f.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s.parse::<u32>().map_err(|_| err())?)),
            None => (part, None),
        };
        if step == Some(0) {
            return Err(err());
        }
        let (lo, hi) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (parse_value(a, field, names)?, parse_value(b, field, names)?)
        } else {
            let v = parse_value(range, field, names)?;
            // "a/n" means from a to the end in steps of n.
            if step.is_some() { (v, max) } else { (v, v) }
        };
        if lo < min || hi > max || lo > hi {
            return Err(err());
        }
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

/// ms since epoch of a UTC civil date and time; used by tests and callers building clocks.
pub fn utc_ms(y: i64, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
    (days_from_civil(y, mo, d) * 1440 + i64::from(h) * 60 + i64::from(mi)) * 60_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert!(Schedule::parse("*/5 * * * *").is_ok());
        assert!(Schedule::parse("0 9-17 * JAN-jun mon-FRI").is_ok());
        assert!(Schedule::parse("@hourly").is_ok());
        assert_eq!(Schedule::parse("* * *"), Err(CronError::FieldCount(3)));
        assert!(matches!(
            Schedule::parse("60 * * * *"),
            Err(CronError::Field { field: "minute", .. })
        ));
        assert!(matches!(
            Schedule::parse("*/0 * * * *"),
            Err(CronError::Field { .. })
        ));
        assert_eq!(
            Schedule::parse("TZ=UTC * * * * *"),
            Err(CronError::TimeZonePrefix)
        );
    }

    #[test]
    fn every_five_minutes() {
        let s = Schedule::parse("*/5 * * * *").unwrap();
        let t = utc_ms(2026, 11, 21, 10, 7) + 30_000;
        assert_eq!(s.latest_between(0, t), Some(utc_ms(2026, 11, 21, 10, 5)));
        assert_eq!(s.next_after(t), Some(utc_ms(2026, 11, 21, 10, 10)));
        // Nothing between 10:05 (exclusive) and 10:07.
        assert_eq!(s.latest_between(utc_ms(2026, 11, 21, 10, 5), t), None);
    }

    #[test]
    fn weekday_and_day_of_month_or_semantics() {
        // 2026-11-21 is a Saturday.
        let sat = Schedule::parse("30 12 * * sat").unwrap();
        assert!(sat.matches_minute(utc_ms(2026, 11, 21, 12, 30) / 60_000));
        assert!(!sat.matches_minute(utc_ms(2026, 11, 22, 12, 30) / 60_000));
        let sunday7 = Schedule::parse("0 0 * * 7").unwrap();
        assert!(sunday7.matches_minute(utc_ms(2026, 11, 22, 0, 0) / 60_000));
        // Both restricted: the 1st of the month OR any Monday.
        let either = Schedule::parse("0 0 1 * 1").unwrap();
        assert!(either.matches_minute(utc_ms(2026, 11, 23, 0, 0) / 60_000)); // Monday the 23rd
        assert!(either.matches_minute(utc_ms(2026, 12, 1, 0, 0) / 60_000)); // Tuesday the 1st
        assert!(!either.matches_minute(utc_ms(2026, 12, 2, 0, 0) / 60_000));
    }

    #[test]
    fn leap_day_and_never() {
        let leap = Schedule::parse("0 0 29 2 *").unwrap();
        assert_eq!(
            leap.next_after(utc_ms(2026, 11, 21, 0, 0)),
            Some(utc_ms(2028, 2, 29, 0, 0))
        );
        let never = Schedule::parse("0 0 31 2 *").unwrap();
        assert_eq!(never.next_after(utc_ms(2026, 1, 1, 0, 0)), None);
        let yearly = Schedule::parse("@yearly").unwrap();
        assert_eq!(
            yearly.latest_between(utc_ms(2020, 6, 1, 0, 0), utc_ms(2026, 11, 21, 0, 0)),
            Some(utc_ms(2026, 1, 1, 0, 0))
        );
    }
}
