//! Go's `fmt` printing rules for template values.
//!
//! Templates print values through `fmt` (`{{ . }}`, `print`, `printf`, Sprig's `toString`, `cat`…),
//! and KUDO users see those bytes in their Kubernetes objects: a JSON number `1000000` becomes
//! `1e+06`, a list `[a b]`, a bad verb `%!d(string=x)`. This module reproduces `fmt.Sprint`,
//! `fmt.Sprintln` and `fmt.Sprintf` for the [`Value`] model, checked against the Go oracle.

use crate::value::{ElemType, Value};

/// `fmt.Sprint(v)` of one value (`%v`).
pub fn sprint(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

/// Appends `fmt.Sprint(v)` to `out` without an intermediate allocation for scalars.
pub fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => out.push_str(s),
        Value::Int(i) | Value::Int64(i) => {
            use std::fmt::Write;
            let _ = write!(out, "{i}");
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Float(f) => out.push_str(&format_float(*f, b'g', -1)),
        _ => {
            let mut p = Printer {
                out,
                f: Flags::default(),
            };
            p.print_arg(v, 'v', 0);
        }
    }
}

/// `fmt.Sprint(args...)`: operands are separated by a space when neither side is a string.
pub fn sprint_args(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && !matches!(a, Value::String(_)) && !matches!(args[i - 1], Value::String(_)) {
            out.push(' ');
        }
        write_value(&mut out, a);
    }
    out
}

/// `fmt.Sprintln(args...)`: always a space between operands, and a trailing newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_value(&mut out, a);
    }
    out.push('\n');
    out
}

/// `fmt.Sprintf(format, args...)`, including Go's in-band error forms (`%!d(string=x)`,
/// `%!v(MISSING)`, `%!(EXTRA …)`, `%!(BADWIDTH)`, `%!(NOVERB)`).
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::with_capacity(format.len() + 16);
    let mut p = Printer {
        out: &mut out,
        f: Flags::default(),
    };
    p.do_printf(format, args);
    out
}

/// Go's `strconv.Quote`: double-quoted, Go escapes, printable Unicode kept.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(&mut out, s, false);
    out
}

fn quote_into(out: &mut String, s: &str, ascii_only: bool) {
    out.push('"');
    for c in s.chars() {
        quote_char(out, c, '"', ascii_only);
    }
    out.push('"');
}

fn quote_char(out: &mut String, c: char, q: char, ascii_only: bool) {
    use std::fmt::Write;
    if c == q || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if ascii_only {
        if (c as u32) < 0x80 && is_print(c) {
            out.push(c);
            return;
        }
    } else if is_print(c) {
        out.push(c);
        return;
    }
    match c {
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        _ => {
            let u = c as u32;
            if u < 0x20 || u == 0x7f {
                let _ = write!(out, "\\x{u:02x}");
            } else if u < 0x10000 {
                let _ = write!(out, "\\u{u:04x}");
            } else {
                let _ = write!(out, "\\U{u:08x}");
            }
        }
    }
}

/// Approximation of Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the
/// ASCII space. Rust has no general-category table in std, so controls, non-ASCII spaces and the
/// common format characters are treated as non-printable.
pub fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f | 0x202a..=0x202e
        | 0x2060..=0x2064 | 0x2066..=0x206f | 0xfeff | 0xfff9..=0xfffb | 0xe000..=0xf8ff
        | 0xfffe | 0xffff | 0xf0000..=0x10ffff)
}

/// Go's `strconv.CanBackquote`.
fn can_backquote(s: &str) -> bool {
    s.chars()
        .all(|c| c == '\t' || (c != '`' && c != '\u{feff}' && !c.is_control() && c != '\u{fffd}'))
}

/// Shortest or fixed-precision decimal digits of `|f|`: (digits without trailing zeros
/// unless `keep_zeros`, decimal point position).
fn decimal_digits(f: f64, prec: Option<usize>) -> (Vec<u8>, i32) {
    let s = match prec {
        None => format!("{:e}", f.abs()),
        Some(p) => format!("{:.*e}", p.saturating_sub(1), f.abs()),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant.bytes().filter(|b| b.is_ascii_digit()).collect();
    if digits.iter().all(|&d| d == b'0') {
        return (vec![b'0'], 1);
    }
    (digits, exp + 1)
}

fn trim_zeros(mut d: Vec<u8>) -> Vec<u8> {
    while d.len() > 1 && d.last() == Some(&b'0') {
        d.pop();
    }
    d
}

fn fmt_e(out: &mut String, digits: &[u8], dp: i32, prec: i32, upper: bool) {
    out.push(digits[0] as char);
    if prec > 0 {
        out.push('.');
        let mut i = 1usize;
        let m = (digits.len()).min(prec as usize + 1);
        while i < m {
            out.push(digits[i] as char);
            i += 1;
        }
        while i <= prec as usize {
            out.push('0');
            i += 1;
        }
    }
    out.push(if upper { 'E' } else { 'e' });
    let exp = if digits == [b'0'] { 0 } else { dp - 1 };
    out.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        out.push('0');
    }
    out.push_str(&e.to_string());
}

fn fmt_f(out: &mut String, digits: &[u8], dp: i32, prec: i32) {
    if dp > 0 {
        for i in 0..dp as usize {
            out.push(if i < digits.len() { digits[i] as char } else { '0' });
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 0..prec {
            let j = dp + i;
            out.push(if j >= 0 && (j as usize) < digits.len() {
                digits[j as usize] as char
            } else {
                '0'
            });
        }
    }
}

/// `strconv.FormatFloat(f, 'x', prec, 64)` of a non-negative finite value: `0x1.8p+01`.
fn hex_float(f: f64, prec: i32, upper: bool) -> String {
    let (mut mant, mut exp): (u64, i32) = if f == 0.0 {
        (0, 0)
    } else {
        let bits = f.to_bits();
        let e = ((bits >> 52) & 0x7ff) as i32;
        let m = bits & ((1u64 << 52) - 1);
        if e == 0 {
            // subnormal: normalise
            let mut m = m;
            let mut e = -1022;
            while m & (1u64 << 52) == 0 {
                m <<= 1;
                e -= 1;
            }
            (m, e)
        } else {
            (m | (1u64 << 52), e - 1023)
        }
    };
    // mant has the leading 1 at bit 52; 13 hex digits of fraction.
    let mut frac_digits = 13i32;
    if (0..13).contains(&prec) {
        let shift = (13 - prec) * 4;
        let half = 1u64 << (shift - 1);
        let rem = mant & ((1u64 << shift) - 1);
        mant >>= shift;
        if rem > half || (rem == half && mant & 1 == 1) {
            mant += 1;
        }
        if mant >> (prec * 4) >= 2 {
            mant >>= 1;
            exp += 1;
        }
        frac_digits = prec;
    }
    let lead = if f == 0.0 { 0 } else { mant >> (frac_digits * 4) };
    let mut frac = String::new();
    for i in (0..frac_digits).rev() {
        let d = (mant >> (i * 4)) & 0xf;
        frac.push(std::char::from_digit(d as u32, 16).unwrap_or('0'));
    }
    if prec < 0 {
        while frac.ends_with('0') {
            frac.pop();
        }
    } else {
        while (frac.len() as i32) < prec {
            frac.push('0');
        }
    }
    let mut s = format!("0x{lead}");
    if !frac.is_empty() {
        s.push('.');
        s.push_str(&frac);
    }
    s.push('p');
    s.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        s.push('0');
    }
    s.push_str(&e.to_string());
    if upper { s.to_uppercase() } else { s }
}

/// `strconv.FormatFloat(f, verb, prec, 64)` for verbs `e E f g G` (prec -1 = shortest).
pub fn format_float(f: f64, verb: u8, prec: i32) -> String {
    let mut out = String::new();
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f.is_sign_negative() {
        out.push('-');
    }
    let shortest = prec < 0;
    match verb {
        b'x' | b'X' => out.push_str(&hex_float(f.abs(), prec, verb == b'X')),
        b'b' => {
            // strconv 'b': decimal mantissa and binary exponent, `-ddddp±ddd`; precision ignored.
            let bits = f.to_bits();
            let mut exp = ((bits >> 52) & 0x7ff) as i64;
            let mut mant = bits & ((1u64 << 52) - 1);
            if exp == 0 {
                exp += 1;
            } else {
                mant |= 1u64 << 52;
            }
            exp -= 1023 + 52;
            let sign = if exp >= 0 { '+' } else { '-' };
            out.push_str(&format!("{mant}p{sign}{}", exp.abs()));
        }
        b'e' | b'E' => {
            let (d, dp) = if shortest {
                decimal_digits(f, None)
            } else {
                decimal_digits(f, Some(prec as usize + 1))
            };
            let p = if shortest { d.len() as i32 - 1 } else { prec };
            fmt_e(&mut out, &d, dp, p, verb == b'E');
        }
        b'f' | b'F' => {
            if shortest {
                let (d, dp) = decimal_digits(f, None);
                let p = (d.len() as i32 - dp).max(0);
                fmt_f(&mut out, &d, dp, p);
            } else {
                out.push_str(&format!("{:.*}", prec as usize, f.abs()));
            }
        }
        _ => {
            // 'g' / 'G'
            let mut p = prec;
            let (d, dp) = if shortest {
                decimal_digits(f, None)
            } else {
                if p == 0 {
                    p = 1;
                }
                let (d, dp) = decimal_digits(f, Some(p as usize));
                (trim_zeros(d), dp)
            };
            if shortest {
                p = d.len() as i32;
            }
            let nd = d.len() as i32;
            let mut eprec = p;
            if eprec > nd && nd >= dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = dp - 1;
            if d == [b'0'] {
                // zero: exponent 0
                fmt_f(&mut out, &d, 1, 0);
            } else if exp < -4 || exp >= eprec {
                if p > nd {
                    p = nd;
                }
                fmt_e(&mut out, &d, dp, p - 1, verb == b'G');
            } else {
                if p > dp {
                    p = nd;
                }
                fmt_f(&mut out, &d, dp, (p - dp).max(0));
            }
        }
    }
    out
}

#[derive(Default, Clone, Copy)]
struct Flags {
    sharp: bool,
    zero: bool,
    plus: bool,
    minus: bool,
    space: bool,
    sharp_v: bool,
    plus_v: bool,
    wid: Option<usize>,
    prec: Option<usize>,
}

struct Printer<'a> {
    out: &'a mut String,
    f: Flags,
}

fn rune_count(s: &str) -> usize {
    s.chars().count()
}

impl Printer<'_> {
    fn write_padding(&mut self, n: usize) {
        let c = if self.f.zero { '0' } else { ' ' };
        for _ in 0..n {
            self.out.push(c);
        }
    }

    fn pad(&mut self, s: &str) {
        match self.f.wid {
            Some(w) if w > 0 => {
                let n = w.saturating_sub(rune_count(s));
                if self.f.minus {
                    self.out.push_str(s);
                    self.write_padding(n);
                } else {
                    self.write_padding(n);
                    self.out.push_str(s);
                }
            }
            _ => self.out.push_str(s),
        }
    }

    fn truncate<'s>(&self, s: &'s str) -> &'s str {
        if let Some(p) = self.f.prec
            && let Some((i, _)) = s.char_indices().nth(p)
        {
            return &s[..i];
        }
        s
    }

    fn fmt_s(&mut self, s: &str) {
        let s = self.truncate(s);
        self.pad(s);
    }

    fn fmt_q(&mut self, s: &str) {
        let s = self.truncate(s);
        if self.f.sharp && can_backquote(s) {
            let q = format!("`{s}`");
            self.pad(&q);
            return;
        }
        let mut q = String::with_capacity(s.len() + 2);
        quote_into(&mut q, s, self.f.plus);
        self.pad(&q);
    }

    fn fmt_sbx(&mut self, s: &[u8], upper: bool) {
        let digits: &[u8; 16] = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let x = if upper { 'X' } else { 'x' };
        let mut length = s.len();
        if let Some(p) = self.f.prec {
            length = length.min(p);
        }
        let mut width = 2 * length;
        if width > 0 {
            if self.f.space {
                if self.f.sharp {
                    width *= 2;
                }
                width += length - 1;
            } else if self.f.sharp {
                width += 2;
            }
        } else {
            if let Some(w) = self.f.wid {
                self.write_padding(w);
            }
            return;
        }
        let wid = self.f.wid.unwrap_or(0);
        if wid > width && !self.f.minus {
            self.write_padding(wid - width);
        }
        if self.f.sharp {
            self.out.push('0');
            self.out.push(x);
        }
        for (i, &c) in s[..length].iter().enumerate() {
            if self.f.space && i > 0 {
                self.out.push(' ');
                if self.f.sharp {
                    self.out.push('0');
                    self.out.push(x);
                }
            }
            self.out.push(digits[(c >> 4) as usize] as char);
            self.out.push(digits[(c & 0xf) as usize] as char);
        }
        if wid > width && self.f.minus {
            self.write_padding(wid - width);
        }
    }

    fn fmt_integer(&mut self, v: i64, base: u32, verb: char, upper: bool) {
        let negative = v < 0;
        let mut u = v.unsigned_abs();
        let digits: &[u8] = if upper {
            b"0123456789ABCDEFX"
        } else {
            b"0123456789abcdefx"
        };
        if let Some(0) = self.f.prec
            && u == 0
        {
            let old = self.f.zero;
            self.f.zero = false;
            let w = self.f.wid.unwrap_or(0);
            self.write_padding(w);
            self.f.zero = old;
            return;
        }
        let mut prec = 0usize;
        if let Some(p) = self.f.prec {
            prec = p;
        } else if self.f.zero && self.f.wid.is_some() {
            prec = self.f.wid.unwrap_or(0);
            if negative || self.f.plus || self.f.space {
                prec = prec.saturating_sub(1);
            }
        }
        let mut buf: Vec<u8> = Vec::with_capacity(24);
        let b = base as u64;
        while u >= b {
            buf.push(digits[(u % b) as usize]);
            u /= b;
        }
        buf.push(digits[u as usize]);
        while buf.len() < prec {
            buf.push(b'0');
        }
        if self.f.sharp {
            match base {
                2 => buf.extend_from_slice(b"b0"),
                8 if buf.last() != Some(&b'0') => buf.push(b'0'),
                16 => {
                    buf.push(digits[16]);
                    buf.push(b'0');
                }
                _ => {}
            }
        }
        if verb == 'O' {
            buf.extend_from_slice(b"o0");
        }
        if negative {
            buf.push(b'-');
        } else if self.f.plus {
            buf.push(b'+');
        } else if self.f.space {
            buf.push(b' ');
        }
        buf.reverse();
        let s = String::from_utf8(buf).unwrap_or_default();
        let old = self.f.zero;
        self.f.zero = false;
        self.pad(&s);
        self.f.zero = old;
    }

    fn fmt_unicode(&mut self, u: i64) {
        let mut prec = 4usize;
        if let Some(p) = self.f.prec
            && p > 4
        {
            prec = p;
        }
        let hex = format!("{:X}", u as u64);
        let mut s = String::from("U+");
        for _ in hex.len()..prec {
            s.push('0');
        }
        s.push_str(&hex);
        if self.f.sharp
            && let Some(c) = u32::try_from(u).ok().and_then(char::from_u32)
            && is_print(c)
        {
            s.push_str(" '");
            s.push(c);
            s.push('\'');
        }
        let old = self.f.zero;
        self.f.zero = false;
        self.pad(&s);
        self.f.zero = old;
    }

    fn rune_of(u: i64) -> char {
        u32::try_from(u)
            .ok()
            .and_then(char::from_u32)
            .unwrap_or('\u{fffd}')
    }

    fn fmt_float(&mut self, v: f64, verb: u8, default_prec: i32) {
        let prec = self.f.prec.map(|p| p as i32).unwrap_or(default_prec);
        let s = format_float(v, verb, prec);
        let mut num = if s.starts_with('-') || s.starts_with('+') {
            s
        } else {
            format!("+{s}")
        };
        if self.f.space && num.starts_with('+') && !self.f.plus {
            num.replace_range(0..1, " ");
        }
        let body = &num[1..];
        if body.starts_with('I') || body.starts_with('N') {
            let old = self.f.zero;
            self.f.zero = false;
            let n = if body.starts_with('N') && !self.f.space && !self.f.plus {
                body.to_string()
            } else {
                num.clone()
            };
            self.pad(&n);
            self.f.zero = old;
            return;
        }
        if self.f.sharp && verb != b'b' {
            let mut digits: i32 = match verb {
                b'v' | b'g' | b'G' | b'x' => {
                    if prec == -1 {
                        6
                    } else {
                        prec
                    }
                }
                _ => 0,
            };
            let (mut head, tail) = match num.find(['e', 'E']) {
                Some(i) => (num[..i].to_string(), num[i..].to_string()),
                None => (num.clone(), String::new()),
            };
            let mut has_point = false;
            let mut saw_nonzero = false;
            for c in head[1..].chars() {
                if c == '.' {
                    has_point = true;
                } else {
                    if c != '0' {
                        saw_nonzero = true;
                    }
                    if saw_nonzero {
                        digits -= 1;
                    }
                }
            }
            if !has_point {
                if head.len() == 2 && head.ends_with('0') {
                    digits -= 1;
                }
                head.push('.');
            }
            while digits > 0 {
                head.push('0');
                digits -= 1;
            }
            head.push_str(&tail);
            num = head;
        }
        if self.f.plus || !num.starts_with('+') {
            let wid = self.f.wid.unwrap_or(0);
            if self.f.zero && wid > num.len() {
                let sign = num[..1].to_string();
                self.out.push_str(&sign);
                self.write_padding(wid - num.len());
                self.out.push_str(&num[1..]);
                return;
            }
            self.pad(&num);
            return;
        }
        let rest = num[1..].to_string();
        self.pad(&rest);
    }

    fn bad_verb(&mut self, v: &Value, verb: char) {
        self.out.push_str("%!");
        self.out.push(verb);
        self.out.push('(');
        if let Value::Nil = v {
            self.out.push_str("<nil>");
        } else {
            self.out.push_str(&v.type_name());
            self.out.push('=');
            self.print_arg(v, 'v', 0);
        }
        self.out.push(')');
    }

    fn print_arg(&mut self, v: &Value, verb: char, depth: usize) {
        if verb == 'T' {
            let t = v.type_name();
            self.fmt_s(&t);
            return;
        }
        match v {
            Value::Nil => match verb {
                'v' => self.pad("<nil>"),
                _ => self.bad_verb(v, verb),
            },
            Value::Bool(b) => match verb {
                't' | 'v' => self.pad(if *b { "true" } else { "false" }),
                _ => self.bad_verb(v, verb),
            },
            Value::Int(i) | Value::Int64(i) => self.print_int(v, *i, verb),
            Value::Float(f) => match verb {
                'v' => self.fmt_float(*f, b'g', -1),
                'b' | 'g' | 'G' | 'x' | 'X' => self.fmt_float(*f, verb as u8, -1),
                'f' | 'e' | 'E' => self.fmt_float(*f, verb as u8, 6),
                'F' => self.fmt_float(*f, b'f', 6),
                _ => self.bad_verb(v, verb),
            },
            Value::String(s) => match verb {
                'v' => {
                    if self.f.sharp_v {
                        self.fmt_q(s)
                    } else {
                        self.fmt_s(s)
                    }
                }
                's' => self.fmt_s(s),
                'x' => self.fmt_sbx(s.as_bytes(), false),
                'X' => self.fmt_sbx(s.as_bytes(), true),
                'q' => self.fmt_q(s),
                _ => self.bad_verb(v, verb),
            },
            Value::List(l) => {
                if l.elem == ElemType::Uint8 && matches!(verb, 's' | 'q' | 'x' | 'X') {
                    let bytes: Vec<u8> = l
                        .items
                        .iter()
                        .map(|x| match x {
                            Value::Int(i) | Value::Int64(i) => *i as u8,
                            _ => 0,
                        })
                        .collect();
                    match verb {
                        's' => self.fmt_s(&String::from_utf8_lossy(&bytes)),
                        'q' => self.fmt_q(&String::from_utf8_lossy(&bytes)),
                        'x' => self.fmt_sbx(&bytes, false),
                        _ => self.fmt_sbx(&bytes, true),
                    }
                    return;
                }
                if self.f.sharp_v {
                    self.out.push_str(&v.type_name());
                    self.out.push('{');
                    for (i, x) in l.items.iter().enumerate() {
                        if i > 0 {
                            self.out.push_str(", ");
                        }
                        self.print_elem(x, verb, depth + 1, l.elem);
                    }
                    self.out.push('}');
                } else {
                    self.out.push('[');
                    for (i, x) in l.items.iter().enumerate() {
                        if i > 0 {
                            self.out.push(' ');
                        }
                        self.print_elem(x, verb, depth + 1, l.elem);
                    }
                    self.out.push(']');
                }
            }
            Value::Map(m) => {
                let entries = m.entries.borrow();
                if self.f.sharp_v {
                    self.out.push_str(&v.type_name());
                    self.out.push('{');
                } else {
                    self.out.push_str("map[");
                }
                for (i, (k, x)) in entries.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    let key = Value::str(k.as_str());
                    self.print_arg(&key, verb, depth + 1);
                    self.out.push(':');
                    self.print_elem(x, verb, depth + 1, m.elem);
                }
                self.out.push(if self.f.sharp_v { '}' } else { ']' });
            }
            Value::Object(o) => match verb {
                'v' | 's' => {
                    let s = o.go_string();
                    self.fmt_s(&s)
                }
                'q' => {
                    let s = o.go_string();
                    self.fmt_q(&s)
                }
                'x' | 'X' => {
                    let s = o.go_string();
                    self.fmt_sbx(s.as_bytes(), verb == 'X')
                }
                _ => self.bad_verb(v, verb),
            },
        }
    }

    /// An element of a container: `interface {}` elements that are nil print `<nil>`; with `%#v`
    /// they print `interface {}(nil)`.
    fn print_elem(&mut self, x: &Value, verb: char, depth: usize, elem: ElemType) {
        if matches!(x, Value::Nil) && elem == ElemType::Interface {
            if self.f.sharp_v {
                self.out.push_str("interface {}(nil)");
            } else {
                self.out.push_str("<nil>");
            }
            return;
        }
        self.print_arg(x, verb, depth)
    }

    fn print_int(&mut self, v: &Value, i: i64, verb: char) {
        match verb {
            'v' => {
                if self.f.sharp_v {
                    // Go prints `%#v` of an int as plain decimal
                    self.fmt_integer(i, 10, verb, false)
                } else {
                    self.fmt_integer(i, 10, verb, false)
                }
            }
            'd' => self.fmt_integer(i, 10, verb, false),
            'b' => self.fmt_integer(i, 2, verb, false),
            'o' | 'O' => self.fmt_integer(i, 8, verb, false),
            'x' => self.fmt_integer(i, 16, verb, false),
            'X' => self.fmt_integer(i, 16, verb, true),
            'c' => {
                let c = Self::rune_of(i);
                let mut b = [0u8; 4];
                let s = c.encode_utf8(&mut b).to_string();
                self.pad(&s);
            }
            'q' => {
                let c = Self::rune_of(i);
                let mut s = String::from("'");
                if self.f.sharp && c != '\'' && can_backquote(&c.to_string()) && is_print(c) {
                    s.push(c);
                } else {
                    quote_char(&mut s, c, '\'', self.f.plus);
                }
                s.push('\'');
                self.pad(&s);
            }
            'U' => self.fmt_unicode(i),
            _ => self.bad_verb(v, verb),
        }
    }

    fn do_printf(&mut self, format: &str, a: &[Value]) {
        let fb = format.as_bytes();
        let end = fb.len();
        let mut arg_num = 0usize;
        let mut after_index;
        let mut reordered = false;
        let mut i = 0usize;
        'outer: while i < end {
            let mut good_arg_num = true;
            let lasti = i;
            while i < end && fb[i] != b'%' {
                i += 1;
            }
            if i > lasti {
                self.out.push_str(&format[lasti..i]);
            }
            if i >= end {
                break;
            }
            i += 1;
            self.f = Flags::default();
            while i < end {
                let c = fb[i];
                match c {
                    b'#' => self.f.sharp = true,
                    b'0' => self.f.zero = !self.f.minus,
                    b'+' => self.f.plus = true,
                    b'-' => {
                        self.f.minus = true;
                        self.f.zero = false;
                    }
                    b' ' => self.f.space = true,
                    _ => {
                        if c.is_ascii_lowercase() && arg_num < a.len() {
                            if c == b'v' {
                                self.f.sharp_v = self.f.sharp;
                                self.f.sharp = false;
                                self.f.plus_v = self.f.plus;
                                self.f.plus = false;
                            }
                            self.print_arg(&a[arg_num], c as char, 0);
                            arg_num += 1;
                            i += 1;
                            continue 'outer;
                        }
                        break;
                    }
                }
                i += 1;
            }
            let r = arg_number(arg_num, format, i, a.len(), &mut good_arg_num, &mut reordered);
            arg_num = r.0;
            i = r.1;
            after_index = r.2;
            if i < end && fb[i] == b'*' {
                i += 1;
                let (n, ok, na) = int_from_arg(a, arg_num);
                arg_num = na;
                if !ok {
                    self.out.push_str("%!(BADWIDTH)");
                    self.f.wid = None;
                } else if n < 0 {
                    self.f.wid = Some(n.unsigned_abs() as usize);
                    self.f.minus = true;
                    self.f.zero = false;
                } else {
                    self.f.wid = Some(n as usize);
                }
                after_index = false;
            } else {
                let (n, present, ni) = parse_num(fb, i, end);
                i = ni;
                self.f.wid = if present { Some(n) } else { None };
                if after_index && present {
                    good_arg_num = false;
                }
            }
            if i + 1 < end && fb[i] == b'.' {
                i += 1;
                if after_index {
                    good_arg_num = false;
                }
                let r = arg_number(arg_num, format, i, a.len(), &mut good_arg_num, &mut reordered);
                arg_num = r.0;
                i = r.1;
                after_index = r.2;
                if i < end && fb[i] == b'*' {
                    i += 1;
                    let (n, ok, na) = int_from_arg(a, arg_num);
                    arg_num = na;
                    if !ok || n < 0 {
                        self.f.prec = None;
                    } else {
                        self.f.prec = Some(n as usize);
                    }
                    if !ok {
                        self.out.push_str("%!(BADPREC)");
                    }
                    after_index = false;
                } else {
                    let (n, present, ni) = parse_num(fb, i, end);
                    i = ni;
                    self.f.prec = Some(if present { n } else { 0 });
                }
            }
            if !after_index {
                let r = arg_number(arg_num, format, i, a.len(), &mut good_arg_num, &mut reordered);
                arg_num = r.0;
                i = r.1;
            }
            if i >= end {
                self.out.push_str("%!(NOVERB)");
                break;
            }
            let verb = format[i..].chars().next().unwrap_or('?');
            i += verb.len_utf8();
            if verb == '%' {
                self.out.push('%');
            } else if !good_arg_num {
                self.out.push_str("%!");
                self.out.push(verb);
                self.out.push_str("(BADINDEX)");
            } else if arg_num >= a.len() {
                self.out.push_str("%!");
                self.out.push(verb);
                self.out.push_str("(MISSING)");
            } else {
                if verb == 'v' {
                    self.f.sharp_v = self.f.sharp;
                    self.f.sharp = false;
                    self.f.plus_v = self.f.plus;
                    self.f.plus = false;
                }
                self.print_arg(&a[arg_num], verb, 0);
                arg_num += 1;
            }
        }
        if !reordered && arg_num < a.len() {
            self.f = Flags::default();
            self.out.push_str("%!(EXTRA ");
            for (k, arg) in a[arg_num..].iter().enumerate() {
                if k > 0 {
                    self.out.push_str(", ");
                }
                if let Value::Nil = arg {
                    self.out.push_str("<nil>");
                } else {
                    self.out.push_str(&arg.type_name());
                    self.out.push('=');
                    self.print_arg(arg, 'v', 0);
                }
            }
            self.out.push(')');
        }
    }
}

const TOO_LARGE: i64 = 1_000_000;

fn int_from_arg(a: &[Value], arg_num: usize) -> (i64, bool, usize) {
    if arg_num < a.len() {
        let (mut n, mut ok) = match a[arg_num] {
            Value::Int(i) | Value::Int64(i) => (i, true),
            _ => (0, false),
        };
        if !(-TOO_LARGE..=TOO_LARGE).contains(&n) {
            n = 0;
            ok = false;
        }
        return (n, ok, arg_num + 1);
    }
    (0, false, arg_num)
}

fn parse_num(s: &[u8], start: usize, end: usize) -> (usize, bool, usize) {
    if start >= end {
        return (0, false, end);
    }
    let mut num = 0usize;
    let mut i = start;
    let mut present = false;
    while i < end && s[i].is_ascii_digit() {
        if num > 1_000_000 {
            return (0, false, end);
        }
        num = num * 10 + (s[i] - b'0') as usize;
        present = true;
        i += 1;
    }
    (num, present, i)
}

/// Parses `[n]` at `i`: (new arg number, new index, found).
fn arg_number(
    arg_num: usize,
    format: &str,
    i: usize,
    num_args: usize,
    good: &mut bool,
    reordered: &mut bool,
) -> (usize, usize, bool) {
    let fb = format.as_bytes();
    if fb.len() <= i || fb[i] != b'[' {
        return (arg_num, i, false);
    }
    *reordered = true;
    let rest = &fb[i..];
    // parseArgNumber
    let (index, wid, ok) = {
        let mut res = (0i64, 1usize, false);
        if rest.len() >= 3 {
            for j in 1..rest.len() {
                if rest[j] == b']' {
                    let (n, present, ni) = parse_num(rest, 1, j);
                    if !present || ni != j {
                        res = (0, j + 1, false);
                    } else {
                        res = (n as i64 - 1, j + 1, true);
                    }
                    break;
                }
            }
        }
        res
    };
    if ok && 0 <= index && (index as usize) < num_args {
        return (index as usize, i + wid, true);
    }
    *good = false;
    (arg_num, i + wid, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_like_go() {
        let cases = [
            (1e6, "1e+06"),
            (1.5, "1.5"),
            (1e-5, "1e-05"),
            (123456.7, "123456.7"),
            (0.0, "0"),
            (-2.0, "-2"),
            (1e21, "1e+21"),
            (100000.0, "100000"),
            (0.0001, "0.0001"),
        ];
        for (f, want) in cases {
            assert_eq!(sprint(&Value::Float(f)), want, "{f}");
        }
    }
}
