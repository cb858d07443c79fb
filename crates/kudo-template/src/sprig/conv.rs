//! Go number parsing/formatting and spf13/cast 1.5.0 coercion.
//!
//! Sprig v3 routes `int`, `int64`, `float64` and all integer math (`add`, `max`, `until`'s callers…)
//! through cast, which silently maps anything it cannot convert to 0. KUDO parameters are strings,
//! so `int "010"` (octal, 8) or `int "3.0"` (3) are everyday inputs: the rules here follow Go's
//! `strconv.ParseInt(s, 0, 64)` / `ParseFloat(s, 64)` exactly.

use crate::value::Value;

/// Go's `int64(f)` for a float64 on amd64: truncation, and the "integer indefinite" value
/// (`i64::MIN`) for NaN and out-of-range values (Rust's `as` would saturate instead).
pub fn go_f64_to_i64(f: f64) -> i64 {
    // 2^63 is exactly representable; every float64 in [-2^63, 2^63) converts.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() || !(-LIMIT..LIMIT).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// Go's `strconv` rule for `_` digit separators (only between digits, or after a base prefix).
fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let mut saw = b'^';
    let b = if !b.is_empty() && (b[0] == b'-' || b[0] == b'+') {
        &b[1..]
    } else {
        b
    };
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// `strconv.ParseInt(s, base, 64)`; `base == 0` means Go literal syntax (prefixes, `_`).
pub fn parse_int(s: &str, base: u32) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let s0 = s;
    let (neg, body) = match s.as_bytes()[0] {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let u = parse_uint(body, base, s0)?;
    if neg {
        if u > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((u as i64).wrapping_neg())
        }
    } else if u > i64::MAX as u64 {
        None
    } else {
        Some(u as i64)
    }
}

fn parse_uint(s: &str, base: u32, whole: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let b = s.as_bytes();
    let mut base = base;
    let mut digits = s;
    let base0 = base == 0;
    if base == 0 {
        base = 10;
        if b[0] == b'0' {
            if b.len() >= 3 && b[1].eq_ignore_ascii_case(&b'b') {
                base = 2;
                digits = &s[2..];
            } else if b.len() >= 3 && b[1].eq_ignore_ascii_case(&b'o') {
                base = 8;
                digits = &s[2..];
            } else if b.len() >= 3 && b[1].eq_ignore_ascii_case(&b'x') {
                base = 16;
                digits = &s[2..];
            } else {
                base = 8;
                digits = &s[1..];
            }
        }
    }
    let mut n: u64 = 0;
    let mut underscores = false;
    for c in digits.bytes() {
        if c == b'_' && base0 {
            underscores = true;
            continue;
        }
        let d = (c as char).to_digit(36)?;
        if d >= base {
            return None;
        }
        n = n.checked_mul(base as u64)?.checked_add(d as u64)?;
    }
    if underscores && !underscore_ok(whole) {
        return None;
    }
    Some(n)
}

/// `strconv.ParseFloat(s, 64)`: Go float literal syntax (decimal or `0x…p…` hex, `_` separators),
/// `inf`/`infinity`/`nan` in any case; out-of-range values are errors.
pub fn parse_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let (sign, rest) = match lower.as_bytes().first() {
        Some(b'+') => (1.0, &lower[1..]),
        Some(b'-') => (-1.0, &lower[1..]),
        _ => (1.0, &lower[..]),
    };
    if rest == "inf" || rest == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" {
        return Some(f64::NAN);
    }
    if s.contains('_') && !underscore_ok(s) {
        return None;
    }
    let clean: String = rest.chars().filter(|&c| c != '_').collect();
    if let Some(hex) = clean.strip_prefix("0x") {
        if clean.len() < 3 {
            return None;
        }
        return parse_hex_float(hex).map(|v| sign * v);
    }
    // Decimal: digits [. digits] [e [+-] digits], at least one digit in the mantissa.
    let b = clean.as_bytes();
    let mut i = 0;
    let mut saw_digits = false;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        saw_digits = true;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            saw_digits = true;
        }
    }
    if !saw_digits {
        return None;
    }
    if i < b.len() && b[i] == b'e' {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let st = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == st {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    let v: f64 = clean.parse().ok()?;
    if v.is_infinite() {
        return None;
    }
    Some(sign * v)
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = s.split_once('p')?;
    let mut e: i64 = {
        let (neg, d) = match exp.as_bytes().first() {
            Some(b'+') => (false, &exp[1..]),
            Some(b'-') => (true, &exp[1..]),
            _ => (false, exp),
        };
        if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let v: i64 = d.parse::<i64>().unwrap_or(100_000).min(100_000);
        if neg { -v } else { v }
    };
    let (ip, fp) = mant.split_once('.').unwrap_or((mant, ""));
    if ip.is_empty() && fp.is_empty() {
        return None;
    }
    let mut m: f64 = 0.0;
    for c in ip.chars() {
        m = m * 16.0 + c.to_digit(16)? as f64;
    }
    for c in fp.chars() {
        m = m * 16.0 + c.to_digit(16)? as f64;
        e -= 4;
    }
    let v = m * 2f64.powi(e.clamp(-2000, 2000) as i32);
    if v.is_infinite() { None } else { Some(v) }
}

/// cast's `trimZeroDecimal`: `"3.00"` → `"3"` so integer parsing accepts it.
fn trim_zero_decimal(s: &str) -> &str {
    let b = s.as_bytes();
    let mut found_zero = false;
    let mut i = b.len();
    while i > 0 {
        match b[i - 1] {
            b'.' => {
                if found_zero {
                    return &s[..i - 1];
                }
            }
            b'0' => found_zero = true,
            _ => return s,
        }
        i -= 1;
    }
    s
}

/// `cast.ToInt64E` (also `ToIntE`: `int` is 64-bit on the platforms KUDO ran on). `None` is a
/// cast error, which Sprig turns into 0.
pub fn cast_int64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) | Value::Int64(i) => Some(*i),
        Value::Float(f) => Some(go_f64_to_i64(*f)),
        Value::String(s) => parse_int(trim_zero_decimal(s), 0),
        Value::Bool(b) => Some(*b as i64),
        Value::Nil => Some(0),
        _ => None,
    }
}

/// `cast.ToFloat64E`.
pub fn cast_float64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) | Value::Int64(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::String(s) => parse_float(s),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Nil => Some(0.0),
        _ => None,
    }
}

/// Sprig's `toInt64`: cast with errors mapped to 0.
pub fn to_int64(v: &Value) -> i64 {
    cast_int64(v).unwrap_or(0)
}

/// Sprig's `toFloat64`: cast with errors mapped to 0.
pub fn to_float64(v: &Value) -> f64 {
    cast_float64(v).unwrap_or(0.0)
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`, which is also what `fmt`'s `%v` and yaml.v2 print.
pub fn format_float_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (neg, digits, exp) = shortest_digits(f);
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    // exp is the decimal exponent of the first digit (d.ddd × 10^exp); with the shortest digits
    // strconv switches to exponent form when exp < -4 || exp >= 6.
    if !(-4..6).contains(&exp) {
        push_exp(&mut out, &digits, exp);
    } else {
        push_fixed(&mut out, &digits, exp);
    }
    out
}

fn push_exp(out: &mut String, digits: &str, exp: i32) {
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let a = exp.unsigned_abs();
    if a < 10 {
        out.push('0');
    }
    out.push_str(&a.to_string());
}

fn push_fixed(out: &mut String, digits: &str, exp: i32) {
    if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
}

/// Shortest round-trip decimal digits of `f` (sign, digits without dot, exponent of first digit).
pub fn shortest_digits(f: f64) -> (bool, String, i32) {
    let s = format!("{:e}", f.abs());
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let digits: String = m.chars().filter(|c| c.is_ascii_digit()).collect();
    let exp: i32 = e.parse().unwrap_or(0);
    (f.is_sign_negative(), digits, exp)
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`.
pub fn format_float_f(f: f64) -> String {
    if !f.is_finite() {
        return format_float_g(f);
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (neg, digits, exp) = shortest_digits(f);
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    push_fixed(&mut out, &digits, exp);
    out
}

/// `encoding/json`'s float64 formatting (ES6 style: `1e+21`, `1e-7`, otherwise fixed).
pub fn format_float_json(f: f64) -> String {
    let a = f.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        let (neg, digits, exp) = shortest_digits(f);
        let mut out = String::new();
        if neg {
            out.push('-');
        }
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&exp.unsigned_abs().to_string());
        out
    } else {
        format_float_f(f)
    }
}

pub use kudo_api::strconv::{go_quote, is_go_printable};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_parse_int_rules() {
        assert_eq!(parse_int("010", 0), Some(8));
        assert_eq!(parse_int("0x10", 0), Some(16));
        assert_eq!(parse_int("08", 0), None);
        assert_eq!(parse_int("1_000", 0), Some(1000));
        assert_eq!(parse_int("_1", 0), None);
        assert_eq!(parse_int("-9223372036854775808", 0), Some(i64::MIN));
        assert_eq!(parse_int("9223372036854775808", 0), None);
        assert_eq!(parse_int("0", 0), Some(0));
    }

    #[test]
    fn go_float_formats() {
        assert_eq!(format_float_g(1e6), "1e+06");
        assert_eq!(format_float_g(100000.0), "100000");
        assert_eq!(format_float_g(0.5), "0.5");
        assert_eq!(format_float_g(0.0001), "0.0001");
        assert_eq!(format_float_g(0.00001), "1e-05");
        assert_eq!(format_float_g(123456789.0), "1.23456789e+08");
        assert_eq!(format_float_json(1e21), "1e+21");
        assert_eq!(format_float_json(1e20), "100000000000000000000");
        assert_eq!(format_float_json(1e-7), "1e-7");
    }
}
