//! `format` and `pattern`.
//!
//! kube-apiserver v1.28 checks a custom object's strings against the whole default format registry
//! of its OpenAPI library (`uuid`, `date-time`, `ipv4`, `hostname`, `email`, `byte`, `isbn`...,
//! but not `password`), and ignores formats it does not know. Operator parameters add
//! `quantity`, `duration` as Go writes it, `cron` and `dns1123-label` ([`Formats::Extended`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;

use crate::Formats;

thread_local! {
    /// Compiled `pattern`s by source (`None`: does not compile).
    static PATTERNS: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
}

/// The compiled `pattern`, or `None` when it does not compile (a schema mistake that
/// [`crate::check_schema`] reports; values are not held to it).
pub(crate) fn pattern(p: &str) -> Option<Regex> {
    if let Some(re) = PATTERNS.with(|c| c.borrow().get(p).cloned()) {
        return re;
    }
    let re = Regex::new(p).ok();
    PATTERNS.with(|c| {
        let mut c = c.borrow_mut();
        // Bounded: patterns come from whatever schemas are written; a full cache starts over.
        if c.len() >= 1024 {
            c.clear();
        }
        c.insert(p.to_string(), re.clone())
    });
    re
}

/// Whether `s` is a valid `format`; formats the chosen set does not know are not checked.
pub(crate) fn valid(format: &str, s: &str, formats: Formats) -> bool {
    if formats == Formats::Extended
        && let Some(ok) = extended(format, s)
    {
        return ok;
    }
    kube(format, s).unwrap_or(true)
}

/// The formats operator parameters add; `None` for the others.
fn extended(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "quantity" => is_match(&QUANTITY, s),
        "duration" => kudo_api::duration::parse(s).is_ok(),
        "cron" => is_cron(s),
        "dns1123-label" => s.len() <= 63 && is_match(&DNS1123_LABEL, s),
        _ => return None,
    })
}

/// kube-apiserver's formats; `None` for the ones it does not check.
fn kube(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "uuid" => is_match(&UUID, s),
        "uuid3" => is_match(&UUID3, s),
        "uuid4" => is_match(&UUID4, s),
        "uuid5" => is_match(&UUID5, s),
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "date" => is_date(s),
        "date-time" | "datetime" => is_date_time(s),
        "duration" => is_openapi_duration(s),
        "hostname" => is_hostname(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => is_match(&MAC, s),
        "email" => is_match(&EMAIL, s),
        "uri" => is_uri(s),
        "byte" => is_base64(s),
        "hexcolor" => is_match(&HEXCOLOR, s),
        "rgbcolor" => is_match(&RGBCOLOR, s),
        "ssn" => is_match(&SSN, s),
        "creditcard" => is_match(&CREDITCARD, s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        _ => return None,
    })
}

fn is_match(re: &LazyLock<Regex>, s: &str) -> bool {
    re.is_match(s)
}

macro_rules! regex {
    ($name:ident, $re:expr) => {
        static $name: LazyLock<Regex> =
            LazyLock::new(|| Regex::new($re).expect("a built-in format regex compiles"));
    };
}

regex!(
    QUANTITY,
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
);
regex!(DNS1123_LABEL, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
regex!(
    UUID,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
regex!(
    UUID3,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
regex!(
    UUID4,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
regex!(
    UUID5,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
regex!(
    MAC,
    r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$|^([0-9A-Fa-f]{2}[:-]){7}[0-9A-Fa-f]{2}$|^([0-9A-Fa-f]{2}[:-]){19}[0-9A-Fa-f]{2}$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$"
);
regex!(EMAIL, r"^[^\s@<>()]+@[^\s@<>()]+$");
regex!(HEXCOLOR, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
regex!(
    RGBCOLOR,
    r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
);
regex!(SSN, r"^\d{3}[- ]?\d{2}[- ]?\d{4}$");
regex!(
    CREDITCARD,
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$"
);
regex!(DATE, r"^(\d{4})-(\d{2})-(\d{2})$");
regex!(
    DATE_TIME,
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(:(\d{2})(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$"
);
regex!(
    HOSTNAME,
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$"
);
regex!(
    OPENAPI_DURATION,
    r"^(\s*[0-9]+\s*(ns|us|µs|ms|s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hr|hrs|hour|hours|d|day|days|w|wk|wks|week|weeks)\s*)+$"
);

fn is_date(s: &str) -> bool {
    DATE.captures(s).is_some_and(|c| valid_ymd(&c[1], &c[2], &c[3]))
}

fn valid_ymd(y: &str, m: &str, d: &str) -> bool {
    let (Ok(y), Ok(m), Ok(d)) = (y.parse::<u32>(), m.parse::<u32>(), d.parse::<u32>()) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

fn is_date_time(s: &str) -> bool {
    let Some(c) = DATE_TIME.captures(s) else {
        return false;
    };
    let num = |i: usize| c.get(i).map_or(0, |m| m.as_str().parse::<u32>().unwrap_or(99));
    valid_ymd(&c[1], &c[2], &c[3]) && num(4) < 24 && num(5) < 60 && num(7) < 61
}

/// The OpenAPI library's `duration`: Go's own (`1h30m`) or `3 days`-style.
fn is_openapi_duration(s: &str) -> bool {
    kudo_api::duration::parse(s).is_ok() || OPENAPI_DURATION.is_match(s)
}

fn is_hostname(s: &str) -> bool {
    s.len() <= 255 && HOSTNAME.is_match(s)
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

/// An absolute URI or an absolute path, as a request URI is.
fn is_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    match s.split_once(':') {
        Some((scheme, _)) => {
            let mut cs = scheme.chars();
            cs.next().is_some_and(|c| c.is_ascii_alphabetic())
                && cs.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// Standard base64 with padding.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return false;
    }
    let body = s.trim_end_matches('=');
    b.len() - body.len() <= 2
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

fn isbn_digits(s: &str) -> Vec<char> {
    s.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    if d.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in d.iter().enumerate() {
        let v = match (i, c) {
            (9, 'X') => 10,
            (_, c) if c.is_ascii_digit() => *c as u32 - '0' as u32,
            _ => return false,
        };
        sum += (10 - i as u32) * v;
    }
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    if d.len() != 13 || !d.iter().all(char::is_ascii_digit) {
        return false;
    }
    let sum: u32 = d
        .iter()
        .enumerate()
        .map(|(i, c)| (*c as u32 - '0' as u32) * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

/// A five-field cron expression (or a `@daily`-style nickname) that matches at least sometimes.
fn is_cron(s: &str) -> bool {
    use croner::parser::{CronParser, Seconds, Year};
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    parser.parse(s.trim()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let cases: &[(&str, &str, Formats, bool)] = &[
            (
                "uuid",
                "123e4567-e89b-12d3-a456-426614174000",
                Formats::Kube,
                true,
            ),
            ("uuid", "zz", Formats::Kube, false),
            ("date", "2024-02-29", Formats::Kube, true),
            ("date", "2023-02-29", Formats::Kube, false),
            ("date-time", "2024-01-02T03:04:05Z", Formats::Kube, true),
            ("date-time", "yesterday", Formats::Kube, false),
            ("ipv4", "10.0.0.1", Formats::Kube, true),
            ("ipv4", "10.0.0.256", Formats::Kube, false),
            ("ipv6", "::1", Formats::Kube, true),
            ("cidr", "10.0.0.0/8", Formats::Kube, true),
            ("cidr", "10.0.0.0/33", Formats::Kube, false),
            ("hostname", "db-0.example.com", Formats::Kube, true),
            ("hostname", "no spaces", Formats::Kube, false),
            ("byte", "aGVsbG8=", Formats::Kube, true),
            ("byte", "a", Formats::Kube, false),
            ("email", "a@b.c", Formats::Kube, true),
            ("uri", "https://x", Formats::Kube, true),
            ("uri", "x y", Formats::Kube, false),
            ("isbn10", "0-306-40615-2", Formats::Kube, true),
            ("isbn13", "978-0-306-40615-7", Formats::Kube, true),
            ("password", "anything", Formats::Kube, true),
            ("quantity", "nonsense", Formats::Kube, true),
            ("quantity", "500Mi", Formats::Extended, true),
            ("quantity", "1.5", Formats::Extended, true),
            ("quantity", "5 Mi", Formats::Extended, false),
            ("duration", "1h30m", Formats::Extended, true),
            ("duration", "3 days", Formats::Extended, false),
            ("duration", "3 days", Formats::Kube, true),
            ("cron", "*/5 * * * *", Formats::Extended, true),
            ("cron", "61 * * * *", Formats::Extended, false),
            ("dns1123-label", "my-db", Formats::Extended, true),
            ("dns1123-label", "My_DB", Formats::Extended, false),
        ];
        for (f, s, set, ok) in cases {
            assert_eq!(valid(f, s, *set), *ok, "format {f} on {s:?} ({set:?})");
        }
    }
}
