//! KUDO's `toYaml`: output byte-identical to gopkg.in/yaml.v2 (v2.4.0) `Marshal`.
//!
//! Operators paste `toYaml` output into manifests (`{{ toYaml .Params.X | indent 4 }}`), so the
//! exact text matters: yaml.v2's key order (a "natural" sort, digits compared as numbers), its
//! indentation (sequences inside mappings are not indented), folding of long plain and quoted scalars at
//! column 80, which strings it quotes (anything a
//! YAML 1.1 reader would retype: `yes`, `on`, `0755`, `1.0`, timestamps…) and how (double quotes for
//! retyped strings and non-printable characters, single quotes for indicator characters), and
//! literal blocks (`|`, `|-`, `|+`, indentation hints) for multi-line strings. The emitter below
//! follows libyaml's state machine as yaml.v2 configures it (indent 2, width 80, unicode).

use std::cmp::Ordering;

use crate::sprig::conv::{format_float_g, parse_float, parse_int};
use crate::value::Value;

/// yaml.v2's preferred line width: plain and quoted scalars are folded at spaces past column 80.
const WIDTH: usize = 80;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

#[derive(Clone, Copy, Default)]
struct Ctx {
    mapping: bool,
    simple_key: bool,
}

struct Emitter {
    out: String,
    column: usize,
    whitespace: bool,
    indention: bool,
    indent: i64,
    indents: Vec<i64>,
}

/// Why a value could not be marshalled. `yaml.Marshal` can fail, so the signature keeps the
/// possibility; none of the values a template builds fails today.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(String);

/// Marshals a template value like `yaml.Marshal` (including the final newline).
pub fn to_yaml(v: &Value) -> Result<String, YamlError> {
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
        indent: -1,
        indents: vec![],
    };
    e.node(v, Ctx::default()).map_err(YamlError)?;
    // Document end: a newline unless the cursor is already at the start of an indented line.
    e.write_indent();
    Ok(e.out)
}

/// yaml.v2's key order (`keyList.Less` for string keys).
fn key_less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = crate::sprig::strings_go_is_letter(ar[i]);
        let bl = crate::sprig::strings_go_is_letter(br[i]);
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && crate::sprig::strings_go_is_digit(ar[j - 1]) {
                if ar[j - 1] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
                j -= 1;
            }
        }
        let digit = |c: char| c.to_digit(10).map(|d| d as i64).unwrap_or(c as i64 - '0' as i64);
        let mut ai = i;
        while ai < ar.len() && crate::sprig::strings_go_is_digit(ar[ai]) {
            an = an.wrapping_mul(10).wrapping_add(digit(ar[ai]));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && crate::sprig::strings_go_is_digit(br[bi]) {
            bn = bn.wrapping_mul(10).wrapping_add(digit(br[bi]));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

fn key_cmp(a: &str, b: &str) -> Ordering {
    if key_less(a, b) {
        Ordering::Less
    } else if key_less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// yaml.v2 `isBase60Float`: `1:20` style sexagesimal numbers (YAML 1.1).
fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !(b[0] == b'+' || b[0] == b'-' || b[0].is_ascii_digit()) || !s.contains(':') {
        return false;
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (main, frac) = match body.split_once('.') {
        Some((m, f)) => (m, Some(f)),
        None => (body, None),
    };
    if let Some(f) = frac
        && !f.bytes().all(|c| c.is_ascii_digit() || c == b'_')
    {
        return false;
    }
    let mut parts = main.split(':');
    let first = parts.next().unwrap_or("");
    if first.is_empty()
        || !first.as_bytes()[0].is_ascii_digit()
        || !first.bytes().all(|c| c.is_ascii_digit() || c == b'_')
    {
        return false;
    }
    let mut n = 0;
    for p in parts {
        n += 1;
        let ok = match p.len() {
            1 => p.as_bytes()[0].is_ascii_digit(),
            2 => (b'0'..=b'5').contains(&p.as_bytes()[0]) && p.as_bytes()[1].is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    n > 0
}

/// yaml.v2 `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let st = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - st
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// yaml.v2 `parseTimestamp` (the four formats it accepts, with Go's range checks).
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let year: i64 = s[..4].parse().unwrap_or(0);
    let mut i = 5;
    let num = |i: &mut usize, max_digits: usize| -> Option<u32> {
        let st = *i;
        while *i < b.len() && *i - st < max_digits && b[*i].is_ascii_digit() {
            *i += 1;
        }
        if *i == st { None } else { s[st..*i].parse().ok() }
    };
    let Some(month) = num(&mut i, 2) else { return false };
    if i >= b.len() || b[i] != b'-' {
        return false;
    }
    i += 1;
    let Some(day) = num(&mut i, 2) else { return false };
    if !(1..=12).contains(&month) {
        return false;
    }
    let dim = match month {
        2 => {
            if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 {
                29
            } else {
                28
            }
        }
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day < 1 || day > dim {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let sep = b[i];
    if sep != b'T' && sep != b't' && sep != b' ' {
        return false;
    }
    i += 1;
    let Some(h) = num(&mut i, 2) else { return false };
    if i >= b.len() || b[i] != b':' {
        return false;
    }
    i += 1;
    let Some(m) = num(&mut i, 2) else { return false };
    if i >= b.len() || b[i] != b':' {
        return false;
    }
    i += 1;
    let Some(sec) = num(&mut i, 2) else { return false };
    if h > 23 || m > 59 || sec > 59 {
        return false;
    }
    if i + 1 < b.len() && (b[i] == b'.' || b[i] == b',') && b[i + 1].is_ascii_digit() {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if sep == b' ' {
        return i == b.len();
    }
    if i < b.len() && b[i] == b'Z' {
        return i + 1 == b.len();
    }
    // ±hh:mm
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        let z = &b[i + 1..];
        return z.len() == 5
            && z[0].is_ascii_digit()
            && z[1].is_ascii_digit()
            && z[2] == b':'
            && z[3].is_ascii_digit()
            && z[4].is_ascii_digit();
    }
    false
}

/// Does yaml.v2's `resolve` read this plain scalar back as a string?
fn resolves_to_str(s: &str) -> bool {
    const SPECIAL: [&str; 36] = [
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no", "No", "NO",
        "false", "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null", "NULL", ".nan", ".NaN",
        ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
    ];
    const SPECIAL2: [&str; 3] = ["-.inf", "-.Inf", "-.INF"];
    if SPECIAL.contains(&s) || SPECIAL2.contains(&s) {
        return false;
    }
    let Some(&c) = s.as_bytes().first() else {
        return false;
    };
    match c {
        b'.' => parse_float(s).is_none(),
        b'+' | b'-' | b'0'..=b'9' => {
            if is_timestamp(s) {
                return false;
            }
            let plain: String = s.chars().filter(|&c| c != '_').collect();
            if parse_int(&plain, 0).is_some() || parse_uint0(&plain) {
                return false;
            }
            if is_yaml_style_float(&plain) && parse_float(&plain).is_some() {
                return false;
            }
            if let Some(bits) = plain.strip_prefix("0b") {
                if !bits.is_empty() && bits.bytes().all(|c| c == b'0' || c == b'1') && bits.len() <= 64 {
                    return false;
                }
            } else if let Some(bits) = plain.strip_prefix("-0b")
                && parse_int(&format!("-{bits}"), 2).is_some()
            {
                return false;
            }
            true
        }
        _ => true,
    }
}

fn parse_uint0(s: &str) -> bool {
    !s.starts_with(['+', '-']) && parse_int(&format!("-{s}"), 0).is_none() && {
        // Values above i64::MAX that still fit u64.
        let digits = s.trim_start_matches('0');
        !digits.is_empty()
            && digits.len() <= 20
            && digits.bytes().all(|c| c.is_ascii_digit())
            && digits.parse::<u64>().is_ok()
            && !s.starts_with('0')
    }
}

struct Analysis {
    multiline: bool,
    flow_plain: bool,
    block_plain: bool,
    single: bool,
    block: bool,
}

fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            multiline: false,
            flow_plain: false,
            block_plain: true,
            single: true,
            block: false,
        };
    }
    let chars: Vec<char> = s.chars().collect();
    let (mut block_ind, mut flow_ind) = (false, false);
    if s.starts_with("---") || s.starts_with("...") {
        block_ind = true;
        flow_ind = true;
    }
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut prev_space, mut prev_break) = (false, false);
    let mut preceded_ws = true;
    let n = chars.len();
    for i in 0..n {
        let c = chars[i];
        let followed_ws = i + 1 >= n || is_blank(chars[i + 1]) || is_break(chars[i + 1]);
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%' | '@'
                | '`' => {
                    flow_ind = true;
                    block_ind = true;
                }
                '?' | ':' => {
                    flow_ind = true;
                    if followed_ws {
                        block_ind = true;
                    }
                }
                '-' if followed_ws => {
                    flow_ind = true;
                    block_ind = true;
                }
                _ => {}
            }
        } else {
            match c {
                ',' | '?' | '[' | ']' | '{' | '}' => flow_ind = true,
                ':' => {
                    flow_ind = true;
                    if followed_ws {
                        block_ind = true;
                    }
                }
                '#' if preceded_ws => {
                    flow_ind = true;
                    block_ind = true;
                }
                _ => {}
            }
        }
        if !is_printable(c) {
            special = true;
        }
        if c == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i + 1 == n {
                trailing_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break(c) {
            line_breaks = true;
            if i == 0 {
                leading_break = true;
            }
            if i + 1 == n {
                trailing_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_space = false;
            prev_break = true;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_ws = is_blank(c) || is_break(c);
    }
    let mut a = Analysis {
        multiline: line_breaks,
        flow_plain: true,
        block_plain: true,
        single: true,
        block: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.flow_plain = false;
        a.block_plain = false;
    }
    if trailing_space {
        a.block = false;
    }
    if break_space {
        a.flow_plain = false;
        a.block_plain = false;
        a.single = false;
    }
    if space_break || special {
        a.flow_plain = false;
        a.block_plain = false;
        a.single = false;
        a.block = false;
    }
    if line_breaks {
        a.flow_plain = false;
        a.block_plain = false;
    }
    if flow_ind {
        a.flow_plain = false;
    }
    if block_ind {
        a.block_plain = false;
    }
    a
}

impl Emitter {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// libyaml `write_break`: a line feed is the configured newline, other breaks are copied.
    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    fn write_str(&mut self, s: &str) {
        self.out.push_str(s);
        self.column += s.chars().count();
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(&mut self, ind: &str, need_ws: bool, is_ws: bool, is_indention: bool) {
        if need_ws && !self.whitespace {
            self.put(' ');
        }
        self.write_str(ind);
        self.whitespace = is_ws;
        self.indention = self.indention && is_indention;
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { 2 } else { 0 };
        } else if !indentless {
            self.indent += 2;
        }
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn node(&mut self, v: &Value, ctx: Ctx) -> Result<(), String> {
        match v {
            Value::Nil => self.scalar("null", Style::Plain, ctx),
            Value::Bool(b) => self.scalar(if *b { "true" } else { "false" }, Style::Plain, ctx),
            Value::Int(i) | Value::Int64(i) => self.scalar(&i.to_string(), Style::Plain, ctx),
            Value::Float(f) => {
                let s = match format_float_g(*f).as_str() {
                    "+Inf" => ".inf".to_string(),
                    "-Inf" => "-.inf".to_string(),
                    "NaN" => ".nan".to_string(),
                    s => s.to_string(),
                };
                self.scalar(&s, Style::Plain, ctx)
            }
            Value::String(s) => self.string(s, ctx),
            Value::List(l) => {
                if l.items.is_empty() {
                    self.write_indicator("[", true, true, false);
                    self.write_indicator("]", false, false, false);
                    return Ok(());
                }
                self.increase_indent(false, ctx.mapping && !self.indention);
                for it in l.items.iter() {
                    self.write_indent();
                    self.write_indicator("-", true, false, true);
                    self.node(
                        it,
                        Ctx {
                            mapping: false,
                            simple_key: false,
                        },
                    )?;
                }
                self.pop_indent();
                Ok(())
            }
            Value::Map(m) => {
                let entries: Vec<(String, Value)> = m
                    .entries
                    .borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                self.mapping(entries)
            }
            Value::Object(o) => {
                if let Some(t) = o.as_any().downcast_ref::<crate::sprig::GoTimeRef>() {
                    let s = t.format("2006-01-02T15:04:05.999999999Z07:00");
                    return self.scalar(&s, Style::Plain, ctx);
                }
                if let Some(fields) = crate::sprig::struct_fields(o.as_ref()) {
                    return self.mapping(
                        fields
                            .into_iter()
                            .map(|(k, v)| (k.to_lowercase(), Value::str(v)))
                            .collect(),
                    );
                }
                // TextMarshaler-like objects (`*semver.Version`) marshal as their string form.
                self.string(&o.go_string(), ctx)
            }
        }
    }

    fn mapping(&mut self, mut entries: Vec<(String, Value)>) -> Result<(), String> {
        if entries.is_empty() {
            self.write_indicator("{", true, true, false);
            self.write_indicator("}", false, false, false);
            return Ok(());
        }
        entries.sort_by(|a, b| key_cmp(&a.0, &b.0));
        self.increase_indent(false, false);
        for (k, v) in entries {
            self.write_indent();
            let simple = !analyze(&k).multiline && k.len() <= 128;
            if simple {
                self.string(
                    &k,
                    Ctx {
                        mapping: true,
                        simple_key: true,
                    },
                )?;
                self.write_indicator(":", false, false, false);
            } else {
                self.write_indicator("?", true, false, true);
                self.string(
                    &k,
                    Ctx {
                        mapping: true,
                        simple_key: false,
                    },
                )?;
                self.write_indent();
                self.write_indicator(":", true, false, true);
            }
            self.node(
                &v,
                Ctx {
                    mapping: true,
                    simple_key: false,
                },
            )?;
        }
        self.pop_indent();
        Ok(())
    }

    fn string(&mut self, s: &str, ctx: Ctx) -> Result<(), String> {
        let can_plain = resolves_to_str(s) && !is_base60_float(s);
        let style = if s.contains('\n') {
            Style::Literal
        } else if can_plain {
            Style::Plain
        } else {
            Style::Double
        };
        self.scalar(s, style, ctx)
    }

    fn scalar(&mut self, s: &str, requested: Style, ctx: Ctx) -> Result<(), String> {
        let a = analyze(s);
        let mut style = requested;
        if ctx.simple_key && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain && (!a.block_plain || (s.is_empty() && ctx.simple_key)) {
            style = Style::Single;
        }
        if style == Style::Single && !a.single {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block || ctx.simple_key) {
            style = Style::Double;
        }
        let allow_breaks = !ctx.simple_key;
        self.increase_indent(true, false);
        match style {
            Style::Plain => {
                if !self.whitespace {
                    self.put(' ');
                }
                let chars: Vec<char> = s.chars().collect();
                let mut spaces = false;
                for (i, &c) in chars.iter().enumerate() {
                    if c == ' ' {
                        if allow_breaks && !spaces && self.column > WIDTH && chars.get(i + 1) != Some(&' ') {
                            self.write_indent();
                        } else {
                            self.put(c);
                        }
                        spaces = true;
                    } else {
                        self.put(c);
                        spaces = false;
                    }
                }
                self.whitespace = false;
                self.indention = false;
            }
            Style::Single => {
                self.write_indicator("'", true, false, false);
                let chars: Vec<char> = s.chars().collect();
                let n = chars.len();
                let (mut spaces, mut breaks) = (false, false);
                for (i, &c) in chars.iter().enumerate() {
                    if c == ' ' {
                        if allow_breaks
                            && !spaces
                            && self.column > WIDTH
                            && i > 0
                            && i + 1 < n
                            && chars[i + 1] != ' '
                        {
                            self.write_indent();
                        } else {
                            self.put(c);
                        }
                        spaces = true;
                    } else if is_break(c) {
                        if !breaks && c == '\n' {
                            self.put_break();
                        }
                        self.write_break(c);
                        self.indention = true;
                        breaks = true;
                    } else {
                        if breaks {
                            self.write_indent();
                        }
                        if c == '\'' {
                            self.put('\'');
                        }
                        self.put(c);
                        self.indention = false;
                        spaces = false;
                        breaks = false;
                    }
                }
                self.write_indicator("'", false, false, false);
                self.whitespace = false;
                self.indention = false;
            }
            Style::Double => {
                self.write_indicator("\"", true, false, false);
                let chars: Vec<char> = s.chars().collect();
                let n = chars.len();
                let bom = s.starts_with('\u{feff}');
                let mut spaces = false;
                for (i, &c) in chars.iter().enumerate() {
                    // libyaml's is_bom() tests the start of the value, not the current character:
                    // a value starting with U+FEFF has every character escaped.
                    if bom || !is_printable(c) || is_break(c) || c == '"' || c == '\\' {
                        self.put('\\');
                        let u = c as u32;
                        match u {
                            0x00 => self.put('0'),
                            0x07 => self.put('a'),
                            0x08 => self.put('b'),
                            0x09 => self.put('t'),
                            0x0A => self.put('n'),
                            0x0B => self.put('v'),
                            0x0C => self.put('f'),
                            0x0D => self.put('r'),
                            0x1B => self.put('e'),
                            0x22 => self.put('"'),
                            0x5C => self.put('\\'),
                            0x85 => self.put('N'),
                            0xA0 => self.put('_'),
                            0x2028 => self.put('L'),
                            0x2029 => self.put('P'),
                            _ => {
                                let esc = if u <= 0xFF {
                                    format!("x{u:02X}")
                                } else if u <= 0xFFFF {
                                    format!("u{u:04X}")
                                } else {
                                    format!("U{u:08X}")
                                };
                                self.write_str(&esc);
                            }
                        }
                        spaces = false;
                    } else if c == ' ' {
                        if allow_breaks && !spaces && self.column > WIDTH && i > 0 && i + 1 < n {
                            self.write_indent();
                            if chars[i + 1] == ' ' {
                                self.put('\\');
                            }
                        } else {
                            self.put(c);
                        }
                        spaces = true;
                    } else {
                        self.put(c);
                        spaces = false;
                    }
                }
                self.write_indicator("\"", false, false, false);
                self.whitespace = false;
                self.indention = false;
            }
            Style::Literal => {
                self.write_indicator("|", true, false, false);
                let first = s.chars().next().unwrap_or('x');
                if first == ' ' || is_break(first) {
                    self.write_indicator("2", false, false, false);
                }
                let chars: Vec<char> = s.chars().collect();
                let n = chars.len();
                let chomp = if n == 0 || !is_break(chars[n - 1]) {
                    Some("-")
                } else if n == 1 || is_break(chars[n - 2]) {
                    Some("+")
                } else {
                    None
                };
                if let Some(c) = chomp {
                    self.write_indicator(c, false, false, false);
                }
                self.put_break();
                self.indention = true;
                self.whitespace = true;
                let mut breaks = true;
                for c in chars {
                    if is_break(c) {
                        self.write_break(c);
                        self.indention = true;
                        breaks = true;
                    } else {
                        if breaks {
                            self.write_indent();
                        }
                        self.put(c);
                        self.indention = false;
                        breaks = false;
                    }
                }
            }
        }
        self.pop_indent();
        Ok(())
    }
}
