//! String functions (Sprig `strings.go`, goutils, xstrings and the inline ones of `functions.go`).
//!
//! Go strings are byte strings: `trunc`, `substr` and `abbrev` slice bytes, and Go panics (a
//! template error) when a slice bound is out of range. We slice bytes too; a cut inside a UTF-8
//! sequence, which Go would emit as raw bytes, is rendered with U+FFFD replacement characters.

use std::collections::BTreeMap;

use super::conv::{go_quote, parse_int};
use super::{a_any, a_int, a_str, check_bytes, sig, sprint, strval, var};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::{ElemType, Value};

/// Byte slice `s[a..b]` as a string (lossy when cutting inside a UTF-8 sequence).
pub(crate) fn byte_slice(s: &str, a: usize, b: usize) -> String {
    match s.get(a..b) {
        Some(x) => x.to_string(),
        None => String::from_utf8_lossy(&s.as_bytes()[a..b]).into_owned(),
    }
}

/// Go's `unicode.IsSpace`.
pub(crate) fn go_is_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{85}' | '\u{a0}'
    ) || ((c as u32) > 0xff && c.is_whitespace())
}

/// Go's `unicode.ToUpper` (simple, one-rune case mapping).
pub(crate) fn go_upper(c: char) -> char {
    let mut it = c.to_uppercase();
    match (it.next(), it.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Go's `unicode.ToLower` (simple, one-rune case mapping).
pub(crate) fn go_lower(c: char) -> char {
    if c == '\u{130}' {
        return 'i';
    }
    let mut it = c.to_lowercase();
    match (it.next(), it.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Go's `unicode.ToTitle` (title case equals upper case except for the Latin digraphs).
pub(crate) fn go_title(c: char) -> char {
    match c {
        'Ǆ' | 'ǅ' | 'ǆ' => 'ǅ',
        'Ǉ' | 'ǈ' | 'ǉ' => 'ǈ',
        'Ǌ' | 'ǋ' | 'ǌ' => 'ǋ',
        'Ǳ' | 'ǲ' | 'ǳ' => 'ǲ',
        c => go_upper(c),
    }
}

/// Go's `unicode.IsUpper` (category Lu). Rust's `is_uppercase` also accepts Other_Uppercase
/// (Roman numerals, circled letters), which Go does not.
pub(crate) fn go_is_upper(c: char) -> bool {
    c.is_uppercase() && !matches!(c as u32, 0x2160..=0x216F | 0x24B6..=0x24CF | 0x1F130..=0x1F189)
}

/// Go's `unicode.IsLower` (category Ll), without Rust's Other_Lowercase additions.
pub(crate) fn go_is_lower(c: char) -> bool {
    c.is_lowercase()
        && !matches!(c as u32,
            0xAA | 0xBA | 0x2B0..=0x2B8 | 0x2C0..=0x2C1 | 0x2E0..=0x2E4 | 0x345 | 0x37A
            | 0x1D2C..=0x1D6A | 0x1D78 | 0x1D9B..=0x1DBF | 0x2071 | 0x207F | 0x2090..=0x209C
            | 0x2170..=0x217F | 0x24D0..=0x24E9 | 0x2C7C..=0x2C7D | 0xA69C..=0xA69D | 0xA770
            | 0xA7F8..=0xA7F9 | 0xAB5C..=0xAB5F)
}

/// Go's `unicode.IsLetter` (categories L*): alphabetic, but not letter-like numbers (Nl) nor
/// the other alphabetic marks Rust includes.
pub(crate) fn go_is_letter(c: char) -> bool {
    c.is_alphabetic()
        && !c.is_numeric()
        && !matches!(c as u32, 0x345 | 0x5B0..=0x5C7 | 0x610..=0x61A | 0x64B..=0x657 | 0x900..=0x903 | 0x93A..=0x94C
            | 0x24B6..=0x24E9 | 0x1F130..=0x1F189)
}

/// Go's `unicode.IsDigit` (category Nd): numeric characters that have a decimal digit value.
pub(crate) fn go_is_digit(c: char) -> bool {
    c.is_ascii_digit()
        || (!c.is_ascii()
            && c.is_numeric()
            && !matches!(c as u32, 0xB2 | 0xB3 | 0xB9 | 0xBC..=0xBE | 0x2070..=0x2079 | 0x2080..=0x2089
                | 0x2150..=0x218B | 0x2460..=0x24FF | 0x2776..=0x2793 | 0x3007 | 0x3021..=0x3029
                | 0x3038..=0x303A | 0x3192..=0x3195 | 0x3220..=0x3229 | 0x3248..=0x324F
                | 0x3251..=0x325F | 0x3280..=0x3289 | 0x32B1..=0x32BF | 0x4E00..=0x9FFF))
}

fn is_title_case(c: char) -> bool {
    matches!(c as u32, 0x1C5 | 0x1C8 | 0x1CB | 0x1F2 | 0x1F88..=0x1F8F | 0x1F98..=0x1F9F | 0x1FA8..=0x1FAF | 0x1FBC | 0x1FCC | 0x1FFC)
}

/// Go's `unicode.IsPunct` (general category P). Exact for ASCII and Latin-1, approximate beyond.
pub(crate) fn go_is_punct(c: char) -> bool {
    if c.is_ascii() {
        return matches!(
            c,
            '!' | '"'
                | '#'
                | '%'
                | '&'
                | '\''
                | '('
                | ')'
                | '*'
                | ','
                | '-'
                | '.'
                | '/'
                | ':'
                | ';'
                | '?'
                | '@'
                | '['
                | '\\'
                | ']'
                | '_'
                | '{'
                | '}'
        );
    }
    let u = c as u32;
    matches!(u, 0xA1 | 0xA7 | 0xAB | 0xB6 | 0xB7 | 0xBB | 0xBF
        | 0x2010..=0x2027 | 0x2030..=0x2043 | 0x2045..=0x2051 | 0x2053..=0x205E
        | 0x3001..=0x3003 | 0x3008..=0x3011 | 0x3014..=0x301F | 0xFF01..=0xFF03
        | 0xFF05..=0xFF0A | 0xFF0C..=0xFF0F | 0xFF1A | 0xFF1B | 0xFF1F | 0xFF20)
}

fn strings_title(s: &str) -> String {
    // Go's strings.Title: a letter is title-cased when the previous rune is a separator.
    let mut prev = ' ';
    s.chars()
        .map(|c| {
            let sep = if prev.is_ascii() {
                !(prev.is_ascii_alphanumeric() || prev == '_')
            } else if go_is_letter(prev) || go_is_digit(prev) {
                false
            } else {
                go_is_space(prev)
            };
            prev = c;
            if sep { go_title(c) } else { c }
        })
        .collect()
}

fn untitle(s: &str) -> String {
    let mut next = true;
    s.chars()
        .map(|c| {
            if go_is_space(c) {
                next = true;
                c
            } else if next {
                next = false;
                go_lower(c)
            } else {
                c
            }
        })
        .collect()
}

fn swapcase(s: &str) -> String {
    let mut ws = true;
    s.chars()
        .map(|c| {
            if go_is_upper(c) || is_title_case(c) {
                ws = false;
                go_lower(c)
            } else if go_is_lower(c) {
                if ws {
                    ws = false;
                    go_title(c)
                } else {
                    go_upper(c)
                }
            } else {
                ws = go_is_space(c);
                c
            }
        })
        .collect()
}

/// goutils `Initials`/`DeleteWhiteSpace` look at single bytes as runes (Latin-1 view).
fn byte_is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | 0x85 | 0xa0)
}

fn initials(s: &str) -> String {
    let mut out = String::new();
    let mut gap = true;
    for &b in s.as_bytes() {
        if byte_is_space(b) {
            gap = true;
        } else if gap {
            out.push(b as char);
            gap = false;
        }
    }
    out
}

fn nospace(s: &str) -> String {
    let b = s.as_bytes();
    if !b.iter().any(|&c| byte_is_space(c)) {
        return s.to_string();
    }
    // Go writes each remaining byte as a rune: non-ASCII bytes become their Latin-1 characters.
    b.iter()
        .filter(|&&c| !byte_is_space(c))
        .map(|&c| c as char)
        .collect()
}

/// goutils `AbbreviateFull` (byte based).
fn abbreviate_full(s: &str, offset: i64, max_width: i64) -> String {
    let len = s.len() as i64;
    if s.is_empty() || max_width < 4 {
        return String::new();
    }
    if len <= max_width {
        return s.to_string();
    }
    let mut offset = offset.min(len);
    if len - offset < max_width - 3 {
        offset = len - (max_width - 3);
    }
    if offset <= 4 {
        return format!("{}...", byte_slice(s, 0, (max_width - 3) as usize));
    }
    if max_width < 7 {
        return String::new();
    }
    if offset + max_width - 3 < len {
        let tail = byte_slice(s, offset as usize, len as usize);
        return format!("...{}", abbreviate_full(&tail, 0, max_width - 3));
    }
    format!(
        "...{}",
        byte_slice(s, (len - (max_width - 3)) as usize, len as usize)
    )
}

/// goutils `WrapCustom` (byte based, words split on ' ').
fn wrap_custom(s: &str, width: i64, nl: &str, long_words: bool) -> String {
    if s.is_empty() {
        return String::new();
    }
    let nl = if nl.is_empty() { "\n" } else { nl };
    let width = width.max(1) as usize;
    let b = s.as_bytes();
    let len = b.len();
    let mut off = 0usize;
    let mut out = String::new();
    while len - off > width {
        if b[off] == b' ' {
            off += 1;
            continue;
        }
        let end = (width + off + 1).min(len);
        match b[off..end].iter().rposition(|&c| c == b' ') {
            Some(p) => {
                out.push_str(&byte_slice(s, off, off + p));
                out.push_str(nl);
                off = off + p + 1;
            }
            None => {
                let end = width + off;
                if long_words {
                    out.push_str(&byte_slice(s, off, end));
                    out.push_str(nl);
                    off += width;
                } else {
                    match b[end..].iter().position(|&c| c == b' ') {
                        None => {
                            out.push_str(&byte_slice(s, off, len));
                            off = len;
                        }
                        Some(i) => {
                            out.push_str(&byte_slice(s, off, end + i));
                            out.push_str(nl);
                            off = end + i + 1;
                        }
                    }
                }
            }
        }
    }
    out.push_str(&byte_slice(s, off, len));
    out
}

// ---- xstrings case conversion ----

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || go_is_space(c)
}

fn is_alphabet(c: char) -> bool {
    if !go_is_letter(c) {
        return false;
    }
    let u = c as u32;
    !((0x4E00..=0x9FCC).contains(&u) || (0x3400..=0x4D85).contains(&u) || (0x20000..=0x2B81D).contains(&u))
}

fn is_number(c: char) -> bool {
    c.is_numeric()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Wt {
    Invalid,
    Number,
    Upper,
    Alpha,
    Connector,
    Punct,
    Other,
}

/// xstrings `nextWord`: classifies and splits off the next word.
fn next_word(s: &str) -> (Wt, &str, &str) {
    let mut it = s.char_indices().peekable();
    let Some((_, r)) = it.next() else {
        return (Wt::Invalid, "", "");
    };
    let mut end = r.len_utf8();
    let rest = |e: usize| &s[e..];
    let take_while = |mut end: usize, f: &dyn Fn(char) -> bool| {
        for c in s[end..].chars() {
            if !f(c) {
                break;
            }
            end += c.len_utf8();
        }
        end
    };
    let wt;
    if is_connector(r) {
        wt = Wt::Connector;
        end = take_while(end, &is_connector);
    } else if go_is_punct(r) {
        wt = Wt::Punct;
        end = take_while(end, &go_is_punct);
    } else if go_is_upper(r) {
        wt = Wt::Upper;
        if let Some(r2) = rest(end).chars().next() {
            if go_is_upper(r2) {
                let mut prev_size = r2.len_utf8();
                end += prev_size;
                let mut stop = None;
                for c in s[end..].chars() {
                    if !go_is_upper(c) {
                        stop = Some(c);
                        break;
                    }
                    prev_size = c.len_utf8();
                    end += prev_size;
                }
                if stop.is_some_and(is_alphabet) {
                    end -= prev_size;
                }
            } else if is_alphabet(r2) {
                end += r2.len_utf8();
                end = take_while(end, &|c| is_alphabet(c) && !go_is_upper(c));
            }
        }
    } else if is_alphabet(r) {
        wt = Wt::Alpha;
        end = take_while(end, &|c| is_alphabet(c) && !go_is_upper(c));
    } else if is_number(r) {
        wt = Wt::Number;
        end = take_while(end, &is_number);
    } else {
        wt = Wt::Other;
        end = take_while(end, &|c| {
            !(is_connector(c) || is_alphabet(c) || is_number(c) || go_is_punct(c))
        });
    }
    (wt, &s[..end], &s[end..])
}

fn to_lower_word(buf: &mut String, wt: Wt, w: &str, conn: char) {
    if wt != Wt::Upper && wt != Wt::Connector {
        buf.push_str(w);
        return;
    }
    for c in w.chars() {
        if is_connector(c) {
            buf.push(conn);
        } else if go_is_upper(c) {
            buf.push(go_lower(c));
        } else {
            buf.push(c);
        }
    }
}

fn camel_to_lower(s: &str, conn: char) -> String {
    if s.is_empty() {
        return String::new();
    }
    let mut buf = String::new();
    let (mut wt, mut word, mut rem) = next_word(s);
    while !rem.is_empty() {
        if wt != Wt::Connector {
            to_lower_word(&mut buf, wt, word, conn);
        }
        let prev = wt;
        let last = word;
        (wt, word, rem) = next_word(rem);
        match prev {
            Wt::Number => {
                while wt == Wt::Alpha || wt == Wt::Number {
                    to_lower_word(&mut buf, wt, word, conn);
                    (wt, word, rem) = next_word(rem);
                }
                if wt != Wt::Invalid && wt != Wt::Punct && wt != Wt::Connector {
                    buf.push(conn);
                }
            }
            Wt::Connector => to_lower_word(&mut buf, prev, last, conn),
            Wt::Punct => {}
            _ => {
                if wt != Wt::Number {
                    if wt != Wt::Connector && wt != Wt::Punct {
                        buf.push(conn);
                    }
                    continue;
                }
                if rem.is_empty() {
                    continue;
                }
                let last = word;
                (wt, word, rem) = next_word(rem);
                if wt != Wt::Alpha {
                    to_lower_word(&mut buf, Wt::Number, last, conn);
                    if wt != Wt::Connector && wt != Wt::Punct {
                        buf.push(conn);
                    }
                    continue;
                }
                buf.push(conn);
                to_lower_word(&mut buf, Wt::Number, last, conn);
                while wt == Wt::Alpha || wt == Wt::Number {
                    to_lower_word(&mut buf, wt, word, conn);
                    (wt, word, rem) = next_word(rem);
                }
                if wt != Wt::Invalid && wt != Wt::Connector && wt != Wt::Punct {
                    buf.push(conn);
                }
            }
        }
    }
    to_lower_word(&mut buf, wt, word, conn);
    buf
}

fn camelcase(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let mut buf = String::new();
    let mut chars = s.chars();
    let mut r0 = '\0';
    let mut got = false;
    for c in chars.by_ref() {
        got = true;
        if !is_connector(c) {
            r0 = go_upper(c);
            break;
        }
        buf.push(c);
        r0 = c;
    }
    let rest: Vec<char> = chars.collect();
    if rest.is_empty() {
        if got {
            buf.push(r0);
        }
        return buf;
    }
    for c in rest {
        let r1 = r0;
        r0 = c;
        if is_connector(r0) && is_connector(r1) {
            buf.push(r1);
            continue;
        }
        if is_connector(r1) {
            r0 = go_upper(r0);
        } else {
            r0 = go_lower(r0);
            buf.push(r1);
        }
    }
    buf.push(r0);
    buf
}

/// Go's `strings.Split`/`SplitN` (`n < 0`: all; an empty separator splits into runes).
pub(crate) fn go_split(s: &str, sep: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return vec![];
    }
    if sep.is_empty() {
        let chars: Vec<char> = s.chars().collect();
        let limit = if n < 0 || n as usize > chars.len() {
            chars.len()
        } else {
            n as usize
        };
        let mut out: Vec<String> = Vec::with_capacity(limit);
        for (i, c) in s.char_indices() {
            if out.len() + 1 == limit {
                out.push(s[i..].to_string());
                break;
            }
            out.push(c.to_string());
        }
        return out;
    }
    if n < 0 {
        s.split(sep).map(str::to_string).collect()
    } else {
        s.splitn(n as usize, sep).map(str::to_string).collect()
    }
}

fn index_map(parts: Vec<String>) -> Value {
    let m: BTreeMap<String, Value> = parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| (format!("_{i}"), Value::str(p)))
        .collect();
    Value::typed_map(ElemType::String, m)
}

/// Sprig's `strslice` (`toStrings`, `join`, `sortAlpha`): a slice's non-nil elements via
/// `strval`, nil → `[]`, any other value → a one-element list.
pub(crate) fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l
            .items
            .iter()
            .filter(|x| !matches!(x, Value::Nil))
            .map(strval)
            .collect(),
        Value::Nil => vec![],
        other => vec![strval(other)],
    }
}

fn str_list(items: Vec<String>) -> Value {
    Value::typed_list(ElemType::String, items.into_iter().map(Value::str).collect())
}

fn go_trim(s: &str, cutset: &str) -> String {
    s.trim_matches(|c| cutset.contains(c)).to_string()
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("hello", sig(&[]), |_, _| Ok(Value::str("Hello!")));
    m.insert("abbrev", sig(&[P::Int, P::String]), |_, a| {
        let (w, s) = (a_int(a, 0)?, a_str(a, 1)?);
        Ok(Value::str(if w < 4 {
            s.to_string()
        } else {
            abbreviate_full(s, 0, w)
        }))
    });
    m.insert("abbrevboth", sig(&[P::Int, P::Int, P::String]), |_, a| {
        let (l, r, s) = (a_int(a, 0)?, a_int(a, 1)?, a_str(a, 2)?);
        Ok(Value::str(if r < 4 || l > 0 && r < 7 {
            s.to_string()
        } else {
            abbreviate_full(s, l, r)
        }))
    });
    m.insert("trunc", sig(&[P::Int, P::String]), |_, a| {
        let (c, s) = (a_int(a, 0)?, a_str(a, 1)?);
        let len = s.len() as i64;
        Ok(Value::str(if c < 0 && len + c > 0 {
            byte_slice(s, (len + c) as usize, len as usize)
        } else if c >= 0 && len > c {
            byte_slice(s, 0, c as usize)
        } else {
            s.to_string()
        }))
    });
    m.insert("trim", sig(&[P::String]), |_, a| {
        Ok(Value::str(a_str(a, 0)?.trim_matches(go_is_space)))
    });
    m.insert("upper", sig(&[P::String]), |_, a| {
        Ok(Value::str(
            a_str(a, 0)?
                .chars()
                .map(go_upper)
                .collect::<std::string::String>(),
        ))
    });
    m.insert("lower", sig(&[P::String]), |_, a| {
        Ok(Value::str(
            a_str(a, 0)?
                .chars()
                .map(go_lower)
                .collect::<std::string::String>(),
        ))
    });
    m.insert("title", sig(&[P::String]), |_, a| {
        Ok(Value::str(strings_title(a_str(a, 0)?)))
    });
    m.insert("untitle", sig(&[P::String]), |_, a| {
        Ok(Value::str(untitle(a_str(a, 0)?)))
    });
    m.insert("substr", sig(&[P::Int, P::Int, P::String]), |_, a| {
        let (start, end, s) = (a_int(a, 0)?, a_int(a, 1)?, a_str(a, 2)?);
        let len = s.len() as i64;
        let oob =
            |m: std::string::String| Err(FuncError(format!("runtime error: slice bounds out of range {m}")));
        let (lo, hi) = if start < 0 {
            if end < 0 {
                return oob(format!("[:{end}]"));
            }
            if end > len {
                return oob(format!("[:{end}] with length {len}"));
            }
            (0, end)
        } else if end < 0 || end > len {
            if start > len {
                return oob(format!("[{start}:{len}]"));
            }
            (start, len)
        } else {
            if start > end {
                return oob(format!("[{start}:{end}]"));
            }
            (start, end)
        };
        Ok(Value::str(byte_slice(s, lo as usize, hi as usize)))
    });
    m.insert("repeat", sig(&[P::Int, P::String]), |env, a| {
        let (n, s) = (a_int(a, 0)?, a_str(a, 1)?);
        if n < 0 {
            return Err(FuncError("strings: negative Repeat count".into()));
        }
        check_bytes(env.max_items, n as u128 * s.len() as u128, "repeat")?;
        Ok(Value::str(s.repeat(n as usize)))
    });
    for name in ["trimAll", "trimall"] {
        m.insert(name, sig(&[P::String, P::String]), |_, a| {
            Ok(Value::str(go_trim(a_str(a, 1)?, a_str(a, 0)?)))
        });
    }
    m.insert("trimSuffix", sig(&[P::String, P::String]), |_, a| {
        let (suf, s) = (a_str(a, 0)?, a_str(a, 1)?);
        Ok(Value::str(s.strip_suffix(suf).unwrap_or(s)))
    });
    m.insert("trimPrefix", sig(&[P::String, P::String]), |_, a| {
        let (pre, s) = (a_str(a, 0)?, a_str(a, 1)?);
        Ok(Value::str(s.strip_prefix(pre).unwrap_or(s)))
    });
    m.insert("nospace", sig(&[P::String]), |_, a| {
        Ok(Value::str(nospace(a_str(a, 0)?)))
    });
    m.insert("initials", sig(&[P::String]), |_, a| {
        Ok(Value::str(initials(a_str(a, 0)?)))
    });
    m.insert("swapcase", sig(&[P::String]), |_, a| {
        Ok(Value::str(swapcase(a_str(a, 0)?)))
    });
    m.insert("snakecase", sig(&[P::String]), |_, a| {
        Ok(Value::str(camel_to_lower(a_str(a, 0)?, '_')))
    });
    m.insert("kebabcase", sig(&[P::String]), |_, a| {
        Ok(Value::str(camel_to_lower(a_str(a, 0)?, '-')))
    });
    m.insert("camelcase", sig(&[P::String]), |_, a| {
        Ok(Value::str(camelcase(a_str(a, 0)?)))
    });
    m.insert("wrap", sig(&[P::Int, P::String]), |_, a| {
        Ok(Value::str(wrap_custom(a_str(a, 1)?, a_int(a, 0)?, "", false)))
    });
    m.insert("wrapWith", sig(&[P::Int, P::String, P::String]), |env, a| {
        let (width, sep, s) = (a_int(a, 0)?, a_str(a, 1)?, a_str(a, 2)?);
        // At most one separator per `width` bytes of input.
        let breaks = s.len() as u128 / width.max(1) as u128 + 1;
        check_bytes(
            env.max_items,
            s.len() as u128 + breaks * sep.len() as u128,
            "wrapWith",
        )?;
        Ok(Value::str(wrap_custom(s, width, sep, true)))
    });
    m.insert("contains", sig(&[P::String, P::String]), |_, a| {
        Ok(Value::Bool(a_str(a, 1)?.contains(a_str(a, 0)?)))
    });
    m.insert("hasPrefix", sig(&[P::String, P::String]), |_, a| {
        Ok(Value::Bool(a_str(a, 1)?.starts_with(a_str(a, 0)?)))
    });
    m.insert("hasSuffix", sig(&[P::String, P::String]), |_, a| {
        Ok(Value::Bool(a_str(a, 1)?.ends_with(a_str(a, 0)?)))
    });
    m.insert("quote", var(&[], P::Any), |_, a| {
        let parts: Vec<std::string::String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(|v| go_quote(&strval(v)))
            .collect();
        Ok(Value::str(parts.join(" ")))
    });
    m.insert("squote", var(&[], P::Any), |_, a| {
        let parts: Vec<std::string::String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(|v| format!("'{}'", sprint(v)))
            .collect();
        Ok(Value::str(parts.join(" ")))
    });
    m.insert("cat", var(&[], P::Any), |_, a| {
        let parts: Vec<std::string::String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(sprint)
            .collect();
        Ok(Value::str(parts.join(" ")))
    });
    m.insert("indent", sig(&[P::Int, P::String]), |env, a| {
        Ok(Value::str(indent(env.max_items, a_int(a, 0)?, a_str(a, 1)?)?))
    });
    m.insert("nindent", sig(&[P::Int, P::String]), |env, a| {
        Ok(Value::str(format!(
            "\n{}",
            indent(env.max_items, a_int(a, 0)?, a_str(a, 1)?)?
        )))
    });
    m.insert("replace", sig(&[P::String, P::String, P::String]), |env, a| {
        let (old, new, src) = (a_str(a, 0)?, a_str(a, 1)?, a_str(a, 2)?);
        if old.is_empty() {
            let n = src.chars().count() as u128 + 1;
            check_bytes(
                env.max_items,
                src.len() as u128 + n * new.len() as u128,
                "replace",
            )?;
        }
        Ok(Value::str(src.replace(old, new)))
    });
    m.insert("plural", sig(&[P::String, P::String, P::Int]), |_, a| {
        Ok(Value::str(if a_int(a, 2)? == 1 {
            a_str(a, 0)?
        } else {
            a_str(a, 1)?
        }))
    });
    m.insert("toString", sig(&[P::Any]), |_, a| {
        Ok(Value::str(strval(a_any(a, 0))))
    });
    m.insert("split", sig(&[P::String, P::String]), |_, a| {
        Ok(index_map(go_split(a_str(a, 1)?, a_str(a, 0)?, -1)))
    });
    m.insert("splitn", sig(&[P::String, P::Int, P::String]), |_, a| {
        Ok(index_map(go_split(a_str(a, 2)?, a_str(a, 0)?, a_int(a, 1)?)))
    });
    m.insert("splitList", sig(&[P::String, P::String]), |_, a| {
        Ok(str_list(go_split(a_str(a, 1)?, a_str(a, 0)?, -1)))
    });
    m.insert("toStrings", sig(&[P::Any]), |_, a| {
        Ok(str_list(strslice(a_any(a, 0))))
    });
    m.insert("join", sig(&[P::String, P::Any]), |_, a| {
        Ok(Value::str(strslice(a_any(a, 1)).join(a_str(a, 0)?)))
    });
    m.insert("sortAlpha", sig(&[P::Any]), |_, a| {
        let v = a_any(a, 0);
        match v {
            Value::List(_) => {
                let mut items = strslice(v);
                items.sort();
                Ok(str_list(items))
            }
            other => Ok(str_list(vec![strval(other)])),
        }
    });
    m.insert("atoi", sig(&[P::String]), |_, a| {
        // strconv.Atoi: base 10, optional sign, no prefixes or underscores.
        let s = a_str(a, 0)?;
        let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
        let ok = !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit());
        Ok(Value::Int(if ok { parse_int(s, 10).unwrap_or(0) } else { 0 }))
    });
}

fn indent(max: usize, n: i64, s: &str) -> Result<std::string::String, FuncError> {
    if n < 0 {
        return Err(FuncError("strings: negative Repeat count".into()));
    }
    let lines = s.matches('\n').count() as u128 + 1;
    check_bytes(max, s.len() as u128 + lines * n as u128, "indent")?;
    let pad = " ".repeat(n as usize);
    Ok(format!("{pad}{}", s.replace('\n', &format!("\n{pad}"))))
}
