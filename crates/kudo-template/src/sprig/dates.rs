//! Date functions (Sprig `date.go`) over a Go-like `time.Time`.
//!
//! Go formats with reference-time layouts (`2006-01-02 15:04:05`), which templates pass straight
//! through, so layouts are interpreted exactly as Go 1.19's `time` package does. The process's
//! local zone is UTC, like the oracle with `TZ` unset (KUDO's controller image ran in UTC).

use std::any::Any;
use std::rc::Rc;

use chrono::{DateTime, Datelike, Offset, TimeZone, Timelike, Utc};

use super::{a_any, a_str, sig};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::{GoObject, Value};

/// A time zone as Go's `*time.Location`.
#[derive(Clone, Debug)]
pub(crate) enum Loc {
    Utc,
    /// `time.Local`; this process treats it as UTC (name "Local", abbreviation "UTC").
    Local,
    Named(chrono_tz::Tz),
    /// A zone fabricated by parsing (`-0700`, `MST`).
    Fixed(String, i32),
}

/// Go's `time.Time`: an instant plus a location.
#[derive(Clone, Debug)]
pub(crate) struct GoTime {
    pub secs: i64,
    pub nanos: u32,
    pub loc: Loc,
}

/// Civil fields of a time in its zone.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    min: u32,
    sec: u32,
    nanos: u32,
    wday: u32, // 0 = Sunday
    yday: u32,
    offset: i32,
    abbr: String,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

impl GoTime {
    pub fn now() -> GoTime {
        let n = Utc::now();
        GoTime {
            secs: n.timestamp(),
            nanos: n.timestamp_subsec_nanos(),
            loc: Loc::Local,
        }
    }

    pub fn unix(secs: i64) -> GoTime {
        GoTime {
            secs,
            nanos: 0,
            loc: Loc::Local,
        }
    }

    /// Go's zero `time.Time` (January 1, year 1, 00:00:00 UTC).
    pub fn zero() -> GoTime {
        GoTime {
            secs: -62_135_596_800,
            nanos: 0,
            loc: Loc::Utc,
        }
    }

    fn civil(&self) -> Civil {
        let utc: DateTime<Utc> =
            DateTime::from_timestamp(self.secs, self.nanos).unwrap_or(DateTime::<Utc>::MIN_UTC);
        let (offset, abbr) = match &self.loc {
            Loc::Utc | Loc::Local => (0, "UTC".to_string()),
            Loc::Fixed(name, off) => (*off, name.clone()),
            Loc::Named(tz) => {
                use chrono_tz::OffsetName;
                let o = tz.offset_from_utc_datetime(&utc.naive_utc());
                let off = o.fix().local_minus_utc();
                // tzdata's numeric abbreviations ("+11", "+0530") are not names in chrono-tz.
                let abbr = o
                    .abbreviation()
                    .map(str::to_string)
                    .unwrap_or_else(|| numeric_abbr(off));
                (off, abbr)
            }
        };
        let local = utc.naive_utc() + chrono::Duration::seconds(offset as i64);
        Civil {
            year: local.year() as i64,
            month: local.month(),
            day: local.day(),
            hour: local.hour(),
            min: local.minute(),
            sec: local.second(),
            nanos: self.nanos,
            wday: local.weekday().num_days_from_sunday(),
            yday: local.ordinal(),
            offset,
            abbr,
        }
    }

    /// Go's `Time.AddDate`: civil arithmetic in the time's zone, normalising overflow
    /// (January 31 + 1 month = March 3, or 2 in a leap year).
    fn add_date(&self, years: i64, months: i64, days: i64) -> Result<GoTime, String> {
        let c = self.civil();
        let total_months = c.year * 12 + (c.month as i64 - 1) + years * 12 + months;
        let (y, m) = (total_months.div_euclid(12), total_months.rem_euclid(12) + 1);
        let first =
            chrono::NaiveDate::from_ymd_opt(y as i32, m as u32, 1).ok_or("AddDate: year out of range")?;
        let date = first
            .checked_add_signed(chrono::Duration::days(c.day as i64 - 1 + days))
            .ok_or("AddDate: date out of range")?;
        let local = date
            .and_hms_opt(c.hour, c.min, c.sec)
            .ok_or("AddDate: bad time")?;
        let offset = match &self.loc {
            Loc::Named(tz) => tz
                .from_local_datetime(&local)
                .earliest()
                .map(|d| d.offset().fix().local_minus_utc())
                .unwrap_or(c.offset),
            _ => c.offset,
        };
        let secs = local.and_utc().timestamp() - offset as i64;
        Ok(GoTime {
            secs,
            nanos: self.nanos,
            loc: self.loc.clone(),
        })
    }

    /// `Time.Add(d)` for a duration in nanoseconds.
    pub fn add_nanos(&self, d: i128) -> GoTime {
        let total = self.secs as i128 * 1_000_000_000 + self.nanos as i128 + d;
        GoTime {
            secs: total.div_euclid(1_000_000_000) as i64,
            nanos: total.rem_euclid(1_000_000_000) as u32,
            loc: self.loc.clone(),
        }
    }

    pub fn in_loc(&self, loc: Loc) -> GoTime {
        GoTime { loc, ..self.clone() }
    }

    /// Go's `Time.Format(layout)`.
    pub fn format(&self, layout: &str) -> String {
        let c = self.civil();
        let mut out = String::new();
        let mut rest = layout;
        while !rest.is_empty() {
            let (prefix, tok, after) = next_std_chunk(rest);
            out.push_str(prefix);
            rest = after;
            let Some(tok) = tok else { break };
            fmt_token(&mut out, &tok, &c);
        }
        out
    }

    /// Go's `Time.String()` (without the monotonic-clock suffix `m=+…` that `time.Now()` values
    /// carry in Go: it depends on process uptime and has no meaning across renders).
    fn go_string(&self) -> String {
        self.format("2006-01-02 15:04:05.999999999 -0700 MST")
    }
}

/// tzdata's numeric zone abbreviation for an offset: `+11`, `-03`, `+0530`.
fn numeric_abbr(off: i32) -> String {
    let sign = if off < 0 { '-' } else { '+' };
    let a = off.abs();
    let (h, m) = (a / 3600, a / 60 % 60);
    if m == 0 {
        format!("{sign}{h:02}")
    } else {
        format!("{sign}{h:02}{m:02}")
    }
}

/// Layout tokens of Go's `time` package.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PM(bool),
    Tz,
    /// ISO (Z) flag, with seconds, with colons, hours only
    NumTz {
        iso: bool,
        secs: bool,
        colon: bool,
        short: bool,
    },
    Frac {
        zeros: bool,
        n: usize,
        sep: char,
    },
    /// `002` (zero padded) / `__2` (space padded) day of year.
    YearDay {
        zero: bool,
    },
}

fn next_std_chunk(l: &str) -> (&str, Option<Tok>, &str) {
    let b = l.as_bytes();
    let at = |i: usize, s: &str| l[i..].starts_with(s);
    // "Mon"/"Jan" followed by a lower-case letter are words ("Month"), not layout elements.
    let lower_next = |i: usize| b.get(i).is_some_and(|c| c.is_ascii_lowercase());
    for i in 0..b.len() {
        let c = b[i];
        let r = |n: usize, t: Tok| (&l[..i], Some(t), &l[i + n..]);
        match c {
            b'J' if at(i, "Jan") => {
                if at(i, "January") {
                    return r(7, Tok::LongMonth);
                }
                if !lower_next(i + 3) {
                    return r(3, Tok::Month);
                }
            }
            b'M' if at(i, "Mon") => {
                if at(i, "Monday") {
                    return r(6, Tok::LongWeekDay);
                }
                if !lower_next(i + 3) {
                    return r(3, Tok::WeekDay);
                }
            }
            b'M' if at(i, "MST") => return r(3, Tok::Tz),
            b'0' if at(i, "002") => return r(3, Tok::YearDay { zero: true }),
            b'0' if i + 1 < b.len() && (b'1'..=b'6').contains(&b[i + 1]) => {
                let t = match b[i + 1] {
                    b'1' => Tok::ZeroMonth,
                    b'2' => Tok::ZeroDay,
                    b'3' => Tok::ZeroHour12,
                    b'4' => Tok::ZeroMinute,
                    b'5' => Tok::ZeroSecond,
                    _ => Tok::Year,
                };
                return r(2, t);
            }
            b'1' => {
                return if at(i, "15") {
                    r(2, Tok::Hour)
                } else {
                    r(1, Tok::NumMonth)
                };
            }
            b'2' => {
                return if at(i, "2006") {
                    r(4, Tok::LongYear)
                } else {
                    r(1, Tok::Day)
                };
            }
            b'_' if at(i, "_2") => {
                if at(i, "_2006") {
                    return (&l[..i + 1], Some(Tok::LongYear), &l[i + 5..]);
                }
                return r(2, Tok::UnderDay);
            }
            b'_' if at(i, "__2") => return r(3, Tok::YearDay { zero: false }),
            b'3' => return r(1, Tok::Hour12),
            b'4' => return r(1, Tok::Minute),
            b'5' => return r(1, Tok::Second),
            b'P' if at(i, "PM") => return r(2, Tok::PM(true)),
            b'p' if at(i, "pm") => return r(2, Tok::PM(false)),
            b'-' | b'Z' => {
                let iso = c == b'Z';
                let forms: [(&str, bool, bool, bool); 5] = [
                    ("070000", true, false, false),
                    ("07:00:00", true, true, false),
                    ("0700", false, false, false),
                    ("07:00", false, true, false),
                    ("07", false, false, true),
                ];
                for (f, secs, colon, short) in forms {
                    if l[i + 1..].starts_with(f) {
                        return r(
                            1 + f.len(),
                            Tok::NumTz {
                                iso,
                                secs,
                                colon,
                                short,
                            },
                        );
                    }
                }
            }
            b'.' | b',' if i + 1 < b.len() && (b[i + 1] == b'0' || b[i + 1] == b'9') => {
                let ch = b[i + 1];
                let mut j = i + 1;
                while j < b.len() && b[j] == ch {
                    j += 1;
                }
                if !(j < b.len() && b[j].is_ascii_digit()) {
                    return (
                        &l[..i],
                        Some(Tok::Frac {
                            zeros: ch == b'0',
                            n: j - i - 1,
                            sep: c as char,
                        }),
                        &l[j..],
                    );
                }
            }
            _ => {}
        }
    }
    (l, None, "")
}

fn pad(out: &mut String, v: i64, width: usize) {
    if v < 0 {
        out.push('-');
    }
    out.push_str(&format!("{:0width$}", v.unsigned_abs(), width = width));
}

fn fmt_token(out: &mut String, t: &Tok, c: &Civil) {
    match t {
        Tok::LongMonth => out.push_str(MONTHS[c.month as usize - 1]),
        Tok::Month => out.push_str(&MONTHS[c.month as usize - 1][..3]),
        Tok::NumMonth => pad(out, c.month as i64, 1),
        Tok::ZeroMonth => pad(out, c.month as i64, 2),
        Tok::LongWeekDay => out.push_str(DAYS[c.wday as usize]),
        Tok::WeekDay => out.push_str(&DAYS[c.wday as usize][..3]),
        Tok::Day => pad(out, c.day as i64, 1),
        Tok::UnderDay => {
            if c.day < 10 {
                out.push(' ');
            }
            pad(out, c.day as i64, 1)
        }
        Tok::ZeroDay => pad(out, c.day as i64, 2),
        Tok::Hour => pad(out, c.hour as i64, 2),
        Tok::Hour12 | Tok::ZeroHour12 => {
            let h = match c.hour % 12 {
                0 => 12,
                h => h,
            };
            pad(out, h as i64, if *t == Tok::Hour12 { 1 } else { 2 })
        }
        Tok::Minute => pad(out, c.min as i64, 1),
        Tok::ZeroMinute => pad(out, c.min as i64, 2),
        Tok::Second => pad(out, c.sec as i64, 1),
        Tok::ZeroSecond => pad(out, c.sec as i64, 2),
        Tok::LongYear => pad(out, c.year, 4),
        Tok::Year => pad(out, c.year.rem_euclid(100), 2),
        Tok::PM(upper) => out.push_str(match (c.hour >= 12, upper) {
            (true, true) => "PM",
            (true, false) => "pm",
            (false, true) => "AM",
            (false, false) => "am",
        }),
        Tok::Tz => {
            if !c.abbr.is_empty() {
                out.push_str(&c.abbr);
            } else {
                let z = c.offset / 60;
                out.push(if z < 0 { '-' } else { '+' });
                pad(out, (z.abs() / 60) as i64, 2);
                pad(out, (z.abs() % 60) as i64, 2);
            }
        }
        Tok::NumTz {
            iso,
            secs,
            colon,
            short,
        } => {
            if *iso && c.offset == 0 {
                out.push('Z');
                return;
            }
            let z = c.offset.abs();
            out.push(if c.offset < 0 { '-' } else { '+' });
            pad(out, (z / 3600) as i64, 2);
            if !short {
                if *colon {
                    out.push(':');
                }
                pad(out, (z / 60 % 60) as i64, 2);
            }
            if *secs {
                if *colon {
                    out.push(':');
                }
                pad(out, (z % 60) as i64, 2);
            }
        }
        Tok::YearDay { zero } => {
            if *zero {
                pad(out, c.yday as i64, 3)
            } else {
                out.push_str(&format!("{:>3}", c.yday))
            }
        }
        Tok::Frac { zeros, n, sep } => {
            let digits = format!("{:09}", c.nanos);
            let mut d = &digits[..(*n).min(9)];
            if !zeros {
                d = d.trim_end_matches('0');
                if d.is_empty() {
                    return;
                }
            }
            out.push(*sep);
            out.push_str(d);
        }
    }
}

/// Go's `time.LoadLocation`; `None` for an unknown zone (Sprig then uses UTC).
fn load_location(name: &str) -> Option<Loc> {
    match name {
        "" | "UTC" => Some(Loc::Utc),
        "Local" => Some(Loc::Local),
        n => n.parse::<chrono_tz::Tz>().ok().map(Loc::Named),
    }
}

/// Go's `Duration.String()`.
pub(crate) fn duration_string(d: i128) -> String {
    if d == 0 {
        return "0s".into();
    }
    let neg = d < 0;
    let u = d.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        let (unit, div) = if u < 1_000 {
            ("ns", 1u128)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&frac_str(u, div));
        out.push_str(unit);
    } else {
        let h = u / 3_600_000_000_000;
        let m = u / 60_000_000_000 % 60;
        let s = u % 60_000_000_000;
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if h > 0 || m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&frac_str(s, 1_000_000_000));
        out.push('s');
    }
    if neg { format!("-{out}") } else { out }
}

fn frac_str(v: u128, div: u128) -> String {
    let ip = v / div;
    let fp = v % div;
    if fp == 0 {
        return ip.to_string();
    }
    let width = (div as f64).log10().round() as usize;
    let f = format!("{fp:0width$}");
    format!("{ip}.{}", f.trim_end_matches('0'))
}

impl GoObject for GoTime {
    fn type_name(&self) -> String {
        "time.Time".into()
    }
    fn kind(&self) -> &'static str {
        "struct"
    }
    fn go_string(&self) -> String {
        GoTime::go_string(self)
    }
    fn field(&self, name: &str) -> Option<Result<Value, String>> {
        let c = self.civil();
        Some(Ok(match name {
            "Year" => Value::Int(c.year),
            "Month" => Value::str(MONTHS[c.month as usize - 1]),
            "Day" => Value::Int(c.day as i64),
            "Hour" => Value::Int(c.hour as i64),
            "Minute" => Value::Int(c.min as i64),
            "Second" => Value::Int(c.sec as i64),
            "Nanosecond" => Value::Int(c.nanos as i64),
            "YearDay" => Value::Int(c.yday as i64),
            "Weekday" => Value::str(DAYS[c.wday as usize]),
            "Unix" => Value::Int64(self.secs),
            "UnixMilli" => Value::Int64(self.secs * 1000 + (self.nanos / 1_000_000) as i64),
            "UnixNano" => Value::Int64(
                self.secs
                    .wrapping_mul(1_000_000_000)
                    .wrapping_add(self.nanos as i64),
            ),
            "UTC" => Value::Object(Rc::new(self.in_loc(Loc::Utc))),
            "Local" => Value::Object(Rc::new(self.in_loc(Loc::Local))),
            "String" => Value::str(GoTime::go_string(self)),
            "IsZero" => Value::Bool(self.secs == -62_135_596_800 && self.nanos == 0),
            _ => return None,
        }))
    }
    fn method_arity(&self, name: &str) -> Option<usize> {
        match name {
            "Format" | "Add" | "Before" | "After" | "Equal" => Some(1),
            "AddDate" => Some(3),
            _ => None,
        }
    }
    fn call_method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        match (name, args) {
            ("Format", [Value::String(l)]) => Some(Ok(Value::str(self.format(l)))),
            ("Format", _) => Some(Err("wrong number or type of args for Format".into())),
            ("Add", [Value::Int(d) | Value::Int64(d)]) => {
                Some(Ok(Value::Object(Rc::new(self.add_nanos(*d as i128)))))
            }
            ("Before" | "After" | "Equal", [other]) => Some(match as_time(other) {
                Some(o) => {
                    let (a, b) = ((self.secs, self.nanos), (o.secs, o.nanos));
                    Ok(Value::Bool(match name {
                        "Before" => a < b,
                        "After" => a > b,
                        _ => a == b,
                    }))
                }
                None => Err(format!(
                    "wrong type for value; expected time.Time; got {}",
                    other.type_name()
                )),
            }),
            ("AddDate", [y, m, d]) => {
                let n = |v: &Value| match v {
                    Value::Int(i) | Value::Int64(i) => Some(*i),
                    _ => None,
                };
                match (n(y), n(m), n(d)) {
                    (Some(y), Some(m), Some(d)) => {
                        Some(self.add_date(y, m, d).map(|t| Value::Object(Rc::new(t))))
                    }
                    _ => Some(Err("wrong type for value; expected int".into())),
                }
            }
            _ => None,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// JSON form of a `time.Time` (RFC 3339 with nanoseconds), for `toJson`.
pub(crate) fn object_json(o: &dyn GoObject) -> Option<String> {
    o.as_any()
        .downcast_ref::<GoTime>()
        .map(|t| format!("\"{}\"", t.format("2006-01-02T15:04:05.999999999Z07:00")))
}

/// The `time.Time` a value holds, if any.
pub(crate) fn as_time(v: &Value) -> Option<GoTime> {
    match v {
        Value::Object(o) => o.as_any().downcast_ref::<GoTime>().cloned(),
        _ => None,
    }
}

fn time_value(t: GoTime) -> Value {
    Value::Object(Rc::new(t))
}

/// Sprig's date argument: `time.Time`, `int`/`int64` Unix seconds, anything else "now".
fn date_arg(v: &Value) -> GoTime {
    match v {
        Value::Int(i) | Value::Int64(i) => GoTime::unix(*i),
        other => as_time(other).unwrap_or_else(GoTime::now),
    }
}

fn date_in_zone(layout: &str, date: &Value, zone: &str) -> String {
    let loc = load_location(zone).unwrap_or(Loc::Utc);
    date_arg(date).in_loc(loc).format(layout)
}

fn need_time(v: &Value) -> Result<GoTime, FuncError> {
    as_time(v).ok_or_else(|| {
        FuncError(format!(
            "wrong type for value; expected time.Time; got {}",
            v.type_name()
        ))
    })
}

// ---- parsing (time.ParseInLocation) ----

fn parse_num(v: &str, min: usize, max: usize) -> Option<(i64, &str)> {
    let n = v.bytes().take(max).take_while(|c| c.is_ascii_digit()).count();
    if n < min {
        return None;
    }
    Some((v[..n].parse().ok()?, &v[n..]))
}

fn lookup_name<'a>(v: &'a str, names: &[&str], short: bool) -> Option<(usize, &'a str)> {
    for (i, n) in names.iter().enumerate() {
        let n = if short { &n[..3] } else { n };
        if v.len() >= n.len() && v[..n.len()].eq_ignore_ascii_case(n) {
            return Some((i, &v[n.len()..]));
        }
    }
    None
}

/// Go's `time.ParseInLocation(layout, value, time.Local)` for the layout elements templates use.
/// Go's `time.skip`: the layout's literal `prefix` must start `value`, except that a run of
/// spaces in the layout matches any run of spaces in the value (none only at its end).
fn skip_literal<'a>(value: &'a str, prefix: &str) -> Option<&'a str> {
    let (p, v) = (prefix.as_bytes(), value.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < p.len() {
        if p[i] == b' ' {
            if j < v.len() && v[j] != b' ' {
                return None;
            }
            while i < p.len() && p[i] == b' ' {
                i += 1;
            }
            while j < v.len() && v[j] == b' ' {
                j += 1;
            }
            continue;
        }
        if j >= v.len() || v[j] != p[i] {
            return None;
        }
        i += 1;
        j += 1;
    }
    // `value[..j]` equals whole characters of `prefix` (or spaces), so `j` is a char boundary.
    value.get(j..)
}

fn parse_time(layout: &str, value: &str) -> Option<GoTime> {
    let (mut year, mut month, mut day, mut hour, mut min, mut sec, mut nanos) =
        (0i64, 1i64, 1i64, 0i64, 0i64, 0i64, 0i64);
    let mut pm: Option<bool> = None;
    let mut offset: Option<i32> = None;
    let mut zone_name: Option<String> = None;
    let mut l = layout;
    let mut v = value;
    loop {
        let (prefix, tok, after) = next_std_chunk(l);
        v = skip_literal(v, prefix)?;
        let Some(tok) = tok else {
            break;
        };
        l = after;
        match tok {
            Tok::LongYear => {
                if v.len() < 4 || !v[..4].bytes().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                year = v[..4].parse().ok()?;
                v = &v[4..];
            }
            Tok::Year => {
                let (y, r) = parse_num(v, 2, 2)?;
                year = if y >= 69 { y + 1900 } else { y + 2000 };
                v = r;
            }
            Tok::LongMonth | Tok::Month => {
                let (i, r) = lookup_name(v, &MONTHS, tok == Tok::Month)?;
                month = i as i64 + 1;
                v = r;
            }
            Tok::NumMonth | Tok::ZeroMonth => {
                let (m, r) = parse_num(v, if tok == Tok::ZeroMonth { 2 } else { 1 }, 2)?;
                if !(1..=12).contains(&m) {
                    return None;
                }
                month = m;
                v = r;
            }
            Tok::LongWeekDay | Tok::WeekDay => {
                let (_, r) = lookup_name(v, &DAYS, tok == Tok::WeekDay)?;
                v = r;
            }
            Tok::Day | Tok::UnderDay | Tok::ZeroDay => {
                if tok == Tok::UnderDay {
                    v = v.strip_prefix(' ').unwrap_or(v);
                }
                let (d, r) = parse_num(v, if tok == Tok::ZeroDay { 2 } else { 1 }, 2)?;
                day = d;
                v = r;
            }
            Tok::Hour => {
                let (h, r) = parse_num(v, 2, 2)?;
                if h > 23 {
                    return None;
                }
                hour = h;
                v = r;
            }
            Tok::Hour12 | Tok::ZeroHour12 => {
                let (h, r) = parse_num(v, if tok == Tok::ZeroHour12 { 2 } else { 1 }, 2)?;
                if h > 12 {
                    return None;
                }
                hour = h;
                v = r;
            }
            Tok::Minute | Tok::ZeroMinute => {
                let (m, r) = parse_num(v, if tok == Tok::ZeroMinute { 2 } else { 1 }, 2)?;
                if m > 59 {
                    return None;
                }
                min = m;
                v = r;
            }
            Tok::Second | Tok::ZeroSecond => {
                let (s, r) = parse_num(v, if tok == Tok::ZeroSecond { 2 } else { 1 }, 2)?;
                if s > 59 {
                    return None;
                }
                sec = s;
                v = r;
                // A fractional second may follow even when the layout has none.
                let next_is_frac = matches!(next_std_chunk(l), ("", Some(Tok::Frac { .. }), _));
                if !next_is_frac
                    && v.len() > 1
                    && (v.starts_with('.') || v.starts_with(','))
                    && v.as_bytes()[1].is_ascii_digit()
                {
                    let n = v[1..].bytes().take_while(|c| c.is_ascii_digit()).count();
                    nanos = frac_nanos(&v[1..1 + n]);
                    v = &v[1 + n..];
                }
            }
            Tok::YearDay { .. } => {
                let n = v
                    .bytes()
                    .take(3)
                    .take_while(|c| c.is_ascii_digit() || *c == b' ')
                    .count();
                if n < 3 {
                    return None;
                }
                v = &v[3..];
            }
            Tok::Frac { zeros, n, .. } => {
                if !v.starts_with('.') && !v.starts_with(',') {
                    if zeros {
                        return None;
                    }
                    continue;
                }
                let digits = v[1..].bytes().take_while(|c| c.is_ascii_digit()).count();
                if zeros && digits != n {
                    return None;
                }
                nanos = frac_nanos(&v[1..1 + digits]);
                v = &v[1 + digits..];
            }
            Tok::PM(upper) => {
                if v.len() < 2 {
                    return None;
                }
                let p = &v[..2];
                let is_pm = if upper { p == "PM" } else { p == "pm" };
                let is_am = if upper { p == "AM" } else { p == "am" };
                if !is_pm && !is_am {
                    return None;
                }
                pm = Some(is_pm);
                v = &v[2..];
            }
            Tok::NumTz {
                iso,
                secs,
                colon,
                short,
            } => {
                if iso && v.starts_with('Z') {
                    v = &v[1..];
                    offset = Some(0);
                    zone_name = Some("UTC".into());
                    continue;
                }
                let sign = match v.as_bytes().first() {
                    Some(b'+') => 1,
                    Some(b'-') => -1,
                    _ => return None,
                };
                v = &v[1..];
                let (h, r) = parse_num(v, 2, 2)?;
                v = r;
                let mut m = 0;
                let mut s = 0;
                if !short {
                    if colon {
                        v = v.strip_prefix(':')?;
                    }
                    let (x, r) = parse_num(v, 2, 2)?;
                    m = x;
                    v = r;
                }
                if secs {
                    if colon {
                        v = v.strip_prefix(':')?;
                    }
                    let (x, r) = parse_num(v, 2, 2)?;
                    s = x;
                    v = r;
                }
                offset = Some(sign * (h * 3600 + m * 60 + s) as i32);
            }
            Tok::Tz => {
                if v.starts_with("UTC") {
                    zone_name = Some("UTC".into());
                    v = &v[3..];
                    continue;
                }
                if v.starts_with(['+', '-']) {
                    // Unnamed zones print as "+11"/"-03" (Go's parseSignedOffset, hours ≤ 24).
                    let n = v[1..].bytes().take_while(u8::is_ascii_digit).count();
                    if n == 0 || v[1..1 + n].parse::<u32>().map_or(true, |h| h > 24) {
                        return None;
                    }
                    zone_name = Some(v[..1 + n].to_string());
                    v = &v[1 + n..];
                    continue;
                }
                let n = v.bytes().take_while(|c| c.is_ascii_uppercase()).count();
                let ok = match n {
                    3 => true,
                    4 => v.as_bytes()[3] == b'T' || v.starts_with("WITA"),
                    5 => v.as_bytes()[4] == b'T',
                    _ => false,
                };
                if !ok {
                    return None;
                }
                zone_name = Some(v[..n].to_string());
                v = &v[n..];
            }
        }
    }
    if !v.is_empty() {
        return None;
    }
    if let Some(p) = pm {
        if p && hour < 12 {
            hour += 12;
        } else if !p && hour == 12 {
            hour = 0;
        }
    }
    let date = chrono::NaiveDate::from_ymd_opt(year as i32, month as u32, day as u32)?;
    let naive = date.and_hms_opt(hour as u32, min as u32, sec as u32)?;
    let local_secs = naive.and_utc().timestamp();
    let (secs, loc) = match (offset, zone_name) {
        (Some(0), Some(n)) if n == "UTC" => (local_secs, Loc::Utc),
        (Some(o), _) => {
            let loc = if o == 0 {
                Loc::Utc
            } else {
                Loc::Fixed(String::new(), o)
            };
            (local_secs - o as i64, loc)
        }
        (None, Some(n)) if n == "UTC" => (local_secs, Loc::Utc),
        (None, Some(n)) => (local_secs, Loc::Fixed(n, 0)),
        (None, None) => (local_secs, Loc::Local),
    };
    Some(GoTime {
        secs,
        nanos: nanos as u32,
        loc,
    })
}

fn frac_nanos(d: &str) -> i64 {
    let mut s: String = d.chars().take(9).collect();
    while s.len() < 9 {
        s.push('0');
    }
    s.parse().unwrap_or(0)
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("now", sig(&[]), |_, _| Ok(time_value(GoTime::now())));
    m.insert("date", sig(&[P::String, P::Any]), |_, a| {
        Ok(Value::str(date_in_zone(a_str(a, 0)?, a_any(a, 1), "Local")))
    });
    for name in ["dateInZone", "date_in_zone"] {
        m.insert(name, sig(&[P::String, P::Any, P::String]), |_, a| {
            Ok(Value::str(date_in_zone(a_str(a, 0)?, a_any(a, 1), a_str(a, 2)?)))
        });
    }
    m.insert("htmlDate", sig(&[P::Any]), |_, a| {
        Ok(Value::str(date_in_zone("2006-01-02", a_any(a, 0), "Local")))
    });
    m.insert("htmlDateInZone", sig(&[P::Any, P::String]), |_, a| {
        Ok(Value::str(date_in_zone("2006-01-02", a_any(a, 0), a_str(a, 1)?)))
    });
    for name in ["dateModify", "date_modify"] {
        m.insert(name, sig(&[P::String, P::Time]), |_, a| {
            let t = need_time(a_any(a, 1))?;
            // Sprig leaves the time unchanged when Go refuses the duration.
            Ok(time_value(match kudo_api::duration::parse(a_str(a, 0)?) {
                Ok(d) => t.add_nanos(i128::from(d)),
                Err(_) => t,
            }))
        });
    }
    m.insert("ago", sig(&[P::Any]), |_, a| {
        let t = match a_any(a, 0) {
            Value::Int(i) | Value::Int64(i) => GoTime::unix(*i),
            other => as_time(other).unwrap_or_else(GoTime::now),
        };
        let now = GoTime::now();
        let d = (now.secs as i128 - t.secs as i128) * 1_000_000_000 + now.nanos as i128 - t.nanos as i128;
        // Duration.Round(time.Second): halves away from zero.
        let s = 1_000_000_000i128;
        let r = if d >= 0 {
            (d + s / 2) / s * s
        } else {
            -((-d + s / 2) / s * s)
        };
        Ok(Value::str(duration_string(r)))
    });
    m.insert("toDate", sig(&[P::String, P::String]), |_, a| {
        Ok(time_value(
            parse_time(a_str(a, 0)?, a_str(a, 1)?).unwrap_or_else(GoTime::zero),
        ))
    });
    m.insert("unixEpoch", sig(&[P::Time]), |_, a| {
        Ok(Value::str(need_time(a_any(a, 0))?.secs.to_string()))
    });
}
