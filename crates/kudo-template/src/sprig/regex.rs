//! Regular expressions (Sprig `regex.go`, Go `regexp` = RE2 syntax).
//!
//! The `regex` crate implements the same RE2 family with leftmost-first semantics; Go's syntax is
//! translated first where the two differ: Go's `\d \w \s \b` are ASCII-only (Unicode-aware in the
//! crate), `\Q…\E` quoting, and `\<`/`\>` which are plain characters in Go but word boundaries in
//! the crate. Compile errors for the common mistakes are reported with Go's wording, because
//! Sprig's non-`must` functions panic with `regexp: Compile(…): error parsing regexp: …`.

use super::{a_int, a_str, sig};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::{ElemType, Value};

/// Go's `regexp` quote helper: backquotes when possible, else `strconv.Quote`.
fn go_regexp_quote(s: &str) -> String {
    let can_backquote = !s
        .chars()
        .any(|c| c == '`' || c == '\u{feff}' || (c.is_control() && c != '\t'));
    if can_backquote {
        format!("`{s}`")
    } else {
        super::conv::go_quote(s)
    }
}

fn perr(code: &str, arg: &str) -> String {
    format!("error parsing regexp: {code}: `{arg}`")
}

const ASCII_CLASSES: [(char, &str, bool); 6] = [
    ('d', "0-9", false),
    ('D', "0-9", true),
    ('w', "0-9A-Za-z_", false),
    ('W', "0-9A-Za-z_", true),
    ('s', "\\t\\n\\x0C\\r ", false),
    ('S', "\\t\\n\\x0C\\r ", true),
];

/// Go's `regexp/syntax` parse errors, found in the order Go's parser reports them (left to
/// right), with Go's wording and argument text. Returns `Ok` for expressions Go accepts.
fn go_syntax_check(expr: &str) -> Result<(), String> {
    let b: Vec<char> = expr.chars().collect();
    let text = |a: usize, z: usize| -> String { b[a..z.min(b.len())].iter().collect() };
    let mut i = 0;
    let mut depth = 0usize;
    // Whether an operand precedes the current position (false at start, after `(` and `|`).
    let mut have_atom = false;
    // Start index of the previous token if it was a repetition operator.
    let mut last_repeat: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        match c {
            '(' => {
                if b.get(i + 1) == Some(&'?') {
                    // (?P<name>re), (?flags), (?flags:re)
                    if b.get(i + 2) == Some(&'P') && b.get(i + 3) == Some(&'<') {
                        let end = b[i + 4..].iter().position(|&x| x == '>').map(|p| i + 4 + p);
                        let Some(end) = end else {
                            return Err(perr("invalid named capture", &text(i, b.len())));
                        };
                        let name = &b[i + 4..end];
                        if name.is_empty() || !name.iter().all(|c| c.is_alphanumeric() || *c == '_') {
                            return Err(perr("invalid named capture", &text(i, end + 1)));
                        }
                        i = end + 1;
                        depth += 1;
                        have_atom = false;
                        last_repeat = None;
                        continue;
                    }
                    let mut j = i + 2;
                    let mut sign = false;
                    let mut saw_flag = false;
                    loop {
                        match b.get(j) {
                            Some('i' | 'm' | 's' | 'U') => {
                                saw_flag = true;
                                j += 1;
                            }
                            Some('-') if !sign => {
                                sign = true;
                                saw_flag = false;
                                j += 1;
                            }
                            Some(':') | Some(')') if !sign || saw_flag => break,
                            _ => return Err(perr("invalid or unsupported Perl syntax", &text(i, j + 1))),
                        }
                    }
                    if b[j] == ':' {
                        depth += 1;
                        have_atom = false;
                    }
                    i = j + 1;
                    last_repeat = None;
                    continue;
                }
                depth += 1;
                have_atom = false;
            }
            '|' => have_atom = false,
            ')' => {
                if depth == 0 {
                    return Err(perr("unexpected )", expr));
                }
                depth -= 1;
                have_atom = true;
            }
            '[' => {
                let start = i;
                let mut j = i + 1;
                if b.get(j) == Some(&'^') {
                    j += 1;
                }
                let mut first = true;
                loop {
                    let Some(&d) = b.get(j) else {
                        return Err(perr("missing closing ]", &text(start, b.len())));
                    };
                    if d == ']' && !first {
                        break;
                    }
                    first = false;
                    if d == '['
                        && b.get(j + 1) == Some(&':')
                        && let Some(p) = b[j + 2..].windows(2).position(|w| w == [':', ']'])
                    {
                        let name: String = b[j + 2..j + 2 + p].iter().collect();
                        let known = [
                            "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print",
                            "punct", "space", "upper", "word", "xdigit",
                        ];
                        if !known.contains(&name.trim_start_matches('^')) {
                            return Err(perr("invalid character class range", &text(j, j + 2 + p + 2)));
                        }
                        j = j + 2 + p + 2;
                        continue;
                    }
                    let lo_start = j;
                    let lo = if d == '\\' {
                        let (ch, n) = check_escape(&b, j, true)?;
                        j += n;
                        ch
                    } else {
                        j += 1;
                        Some(d)
                    };
                    if b.get(j) == Some(&'-') && b.get(j + 1).is_some_and(|&x| x != ']') {
                        j += 1;
                        let hd = b[j];
                        let hi = if hd == '\\' {
                            let (ch, n) = check_escape(&b, j, true)?;
                            j += n;
                            ch
                        } else {
                            j += 1;
                            Some(hd)
                        };
                        if let (Some(l), Some(h)) = (lo, hi)
                            && h < l
                        {
                            return Err(perr("invalid character class range", &text(lo_start, j)));
                        }
                    }
                }
                i = j + 1;
                have_atom = true;
                last_repeat = None;
                continue;
            }
            '*' | '+' | '?' => {
                let mut end = i + 1;
                if b.get(end) == Some(&'?') {
                    end += 1;
                }
                if let Some(lr) = last_repeat {
                    return Err(perr("invalid nested repetition operator", &text(lr, end)));
                }
                if !have_atom {
                    return Err(perr("missing argument to repetition operator", &text(i, end)));
                }
                last_repeat = Some(i);
                i = end;
                continue;
            }
            '{' => {
                if let Some((min, max, len)) = parse_repeat(&b[i..]) {
                    let mut end = i + len;
                    if min > 1000 || max.is_some_and(|m| m > 1000 || min > m) {
                        return Err(perr("invalid repeat count", &text(i, end)));
                    }
                    if b.get(end) == Some(&'?') {
                        end += 1;
                    }
                    if let Some(lr) = last_repeat {
                        return Err(perr("invalid nested repetition operator", &text(lr, end)));
                    }
                    if !have_atom {
                        return Err(perr("missing argument to repetition operator", &text(i, end)));
                    }
                    last_repeat = Some(i);
                    i = end;
                    continue;
                }
                have_atom = true;
            }
            '\\' => {
                if b.get(i + 1) == Some(&'Q') {
                    let rest: String = b[i + 2..].iter().collect();
                    let lit_len = rest
                        .find("\\E")
                        .map(|p| rest[..p].chars().count() + 2)
                        .unwrap_or(rest.chars().count());
                    i += 2 + lit_len;
                    have_atom = true;
                    last_repeat = None;
                    continue;
                }
                let (_, n) = check_escape(&b, i, false)?;
                i += n;
                have_atom = true;
                last_repeat = None;
                continue;
            }
            _ => have_atom = true,
        }
        last_repeat = None;
        i += 1;
    }
    if depth > 0 {
        return Err(perr("missing closing )", expr));
    }
    Ok(())
}

/// `{n}`, `{n,}`, `{n,m}` at the start of `b`: (min, max, length). `None`: a literal `{`.
fn parse_repeat(b: &[char]) -> Option<(u64, Option<u64>, usize)> {
    let mut j = 1;
    let num = |j: &mut usize| -> Option<u64> {
        let st = *j;
        while *j < b.len() && b[*j].is_ascii_digit() {
            *j += 1;
        }
        if *j == st {
            return None;
        }
        let s: String = b[st..*j].iter().collect();
        Some(s.parse::<u64>().unwrap_or(u64::MAX))
    };
    let min = num(&mut j)?;
    let max = if b.get(j) == Some(&',') {
        j += 1;
        if b.get(j) == Some(&'}') {
            None
        } else {
            Some(num(&mut j)?)
        }
    } else {
        Some(min)
    };
    if b.get(j) != Some(&'}') {
        return None;
    }
    Some((min, max, j + 1))
}

/// Checks the escape at `b[i] == '\\'`; returns the literal char it denotes (if any) and its length.
fn check_escape(b: &[char], i: usize, in_class: bool) -> Result<(Option<char>, usize), String> {
    let Some(&c) = b.get(i + 1) else {
        return Err("error parsing regexp: trailing backslash at end of expression: ``".into());
    };
    let esc = |n: usize| -> String { b[i..(i + n).min(b.len())].iter().collect() };
    match c {
        '1'..='7' if !b.get(i + 2).is_some_and(|d| ('0'..='7').contains(d)) => {
            Err(perr("invalid escape sequence", &esc(2)))
        }
        '0'..='7' => {
            let mut n = 2;
            let mut v = c.to_digit(8).unwrap_or(0);
            while n < 4 && b.get(i + n).is_some_and(|d| ('0'..='7').contains(d)) {
                v = v * 8 + b[i + n].to_digit(8).unwrap_or(0);
                n += 1;
            }
            Ok((char::from_u32(v), n))
        }
        'x' => {
            if b.get(i + 2) == Some(&'{') {
                let end = b[i + 3..].iter().position(|&x| x == '}');
                match end {
                    Some(p) if p > 0 && b[i + 3..i + 3 + p].iter().all(|d| d.is_ascii_hexdigit()) => {
                        let s: String = b[i + 3..i + 3 + p].iter().collect();
                        match u32::from_str_radix(&s, 16).ok().and_then(char::from_u32) {
                            Some(ch) => Ok((Some(ch), 4 + p)),
                            None => Err(perr("invalid escape sequence", &esc(4 + p))),
                        }
                    }
                    _ => Err(perr("invalid escape sequence", &esc(b.len() - i))),
                }
            } else if b.get(i + 2).is_some_and(|d| d.is_ascii_hexdigit())
                && b.get(i + 3).is_some_and(|d| d.is_ascii_hexdigit())
            {
                let s: String = b[i + 2..i + 4].iter().collect();
                Ok((u32::from_str_radix(&s, 16).ok().and_then(char::from_u32), 4))
            } else {
                Err(perr("invalid escape sequence", &esc(4)))
            }
        }
        'a' => Ok((Some('\u{7}'), 2)),
        'f' => Ok((Some('\u{c}'), 2)),
        'n' => Ok((Some('\n'), 2)),
        'r' => Ok((Some('\r'), 2)),
        't' => Ok((Some('\t'), 2)),
        'v' => Ok((Some('\u{b}'), 2)),
        'd' | 'D' | 's' | 'S' | 'w' | 'W' => Ok((None, 2)),
        'A' | 'z' | 'b' | 'B' if !in_class => Ok((None, 2)),
        'p' | 'P' => {
            if b.get(i + 2) == Some(&'{') {
                match b[i + 3..].iter().position(|&x| x == '}') {
                    Some(p) => Ok((None, 4 + p)),
                    None => Err(perr("invalid character class range", &esc(b.len() - i))),
                }
            } else if b.get(i + 2).is_some() {
                Ok((None, 3))
            } else {
                Err(perr("invalid character class range", &esc(2)))
            }
        }
        c if (c as u32) < 0x80 && !c.is_ascii_alphanumeric() => Ok((Some(c), 2)),
        _ => Err(perr("invalid escape sequence", &esc(2))),
    }
}

/// Translates Go RE2 syntax to the `regex` crate's, detecting Go's most common syntax errors.
fn translate(expr: &str) -> Result<String, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len() + 8);
    let mut i = 0;
    let mut depth = 0usize;
    let mut in_class = false;
    let mut class_start = 0usize;
    let mut class_len = 0usize; // elements seen in the current class
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&n) = chars.get(i + 1) else {
                return Err("error parsing regexp: trailing backslash at end of expression: ``".into());
            };
            if n == 'Q' {
                let rest: String = chars[i + 2..].iter().collect();
                let (lit, adv) = match rest.find("\\E") {
                    Some(p) => (rest[..p].to_string(), p + 2),
                    None => (rest.clone(), rest.len()),
                };
                out.push_str(&::regex::escape(&lit));
                i += 2 + lit.chars().count() + if adv > lit.len() { 2 } else { 0 };
                continue;
            }
            if let Some((_, set, neg)) = ASCII_CLASSES.iter().find(|(k, _, _)| *k == n) {
                if in_class {
                    if *neg {
                        out.push_str(&format!("[^{set}]"));
                    } else {
                        out.push_str(set);
                    }
                } else {
                    out.push_str(&format!("[{}{set}]", if *neg { "^" } else { "" }));
                }
                class_len += 1;
                i += 2;
                continue;
            }
            match n {
                'b' | 'B' if !in_class => {
                    out.push_str(&format!("(?-u:\\{n})"));
                }
                '<' | '>' => out.push(n),
                '1'..='9' => {
                    let oct_ok = chars.get(i + 2).is_some_and(|d| ('0'..='7').contains(d)) && n <= '7';
                    if !oct_ok {
                        return Err(perr("invalid escape sequence", &format!("\\{n}")));
                    }
                    let mut j = i + 1;
                    let mut v = 0u32;
                    while j < chars.len() && j < i + 4 && ('0'..='7').contains(&chars[j]) {
                        v = v * 8 + chars[j].to_digit(8).unwrap_or(0);
                        j += 1;
                    }
                    out.push_str(&format!("\\x{{{v:x}}}"));
                    i = j;
                    class_len += 1;
                    continue;
                }
                c if c.is_ascii_alphanumeric()
                    && !matches!(
                        c,
                        'a' | 'f'
                            | 't'
                            | 'n'
                            | 'r'
                            | 'v'
                            | 'x'
                            | 'p'
                            | 'P'
                            | 'A'
                            | 'z'
                            | '0'
                            | 'b'
                            | 'B'
                            | 'C'
                    ) =>
                {
                    return Err(perr("invalid escape sequence", &format!("\\{c}")));
                }
                _ => {
                    out.push('\\');
                    out.push(n);
                }
            }
            class_len += 1;
            i += 2;
            continue;
        }
        if in_class {
            if c == ']' && class_len > 0 {
                in_class = false;
            } else if c == '[' && chars.get(i + 1) == Some(&':') {
                // POSIX class [:alpha:] — copy through to the closing :]
                if let Some(p) = chars[i + 2..].windows(2).position(|w| w == [':', ']']) {
                    let end = i + 2 + p + 2;
                    out.extend(&chars[i..end]);
                    i = end;
                    class_len += 1;
                    continue;
                }
                out.push_str("\\[");
                i += 1;
                class_len += 1;
                continue;
            } else if c == '[' || c == '&' || c == '~' || (c == '-' && chars.get(i + 1) == Some(&'-')) {
                // Set operators/nesting of the crate are literals in Go.
                out.push('\\');
                out.push(c);
                i += 1;
                class_len += 1;
                continue;
            }
            if !(c == '^' && i == class_start + 1) {
                class_len += 1;
            }
            out.push(c);
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                class_start = i;
                class_len = 0;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                continue;
            }
            '(' => depth += 1,
            ')' => {
                if depth == 0 {
                    return Err(perr("unexpected )", expr));
                }
                depth -= 1;
            }
            // A `{` that does not start a Go repeat (`{n}`, `{n,}`, `{n,m}`) is a literal.
            '{' if parse_repeat(&chars[i..]).is_none() => {
                out.push_str("\\{");
                i += 1;
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    if in_class {
        let cls: String = chars[class_start..].iter().collect();
        return Err(perr("missing closing ]", &cls));
    }
    if depth > 0 {
        return Err(perr("missing closing )", expr));
    }
    Ok(out)
}

/// Compiles a Go regular expression; the error is Go's `regexp.Compile` error text.
pub(crate) fn compile(expr: &str) -> Result<::regex::Regex, String> {
    go_syntax_check(expr)?;
    let t = translate(expr)?;
    ::regex::RegexBuilder::new(&t).build().map_err(|e| {
        let msg = e.to_string();
        if msg.contains("repetition operator missing expression") {
            perr("missing argument to repetition operator", &rep_op(expr))
        } else if msg.contains("invalid repetition count range") || msg.contains("repetition quantifier") {
            perr("invalid repeat count", &rep_count(expr))
        } else {
            let detail = msg
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or("invalid syntax");
            format!(
                "error parsing regexp: {}: `{expr}`",
                detail.trim_start_matches("error: ")
            )
        }
    })
}

fn rep_op(expr: &str) -> String {
    expr.chars()
        .find(|c| matches!(c, '*' | '+' | '?' | '{'))
        .map(String::from)
        .unwrap_or_default()
}

fn rep_count(expr: &str) -> String {
    match (expr.find('{'), expr.find('}')) {
        (Some(a), Some(b)) if a < b => expr[a..=b].to_string(),
        _ => expr.to_string(),
    }
}

/// `regexp.MustCompile` as Sprig's non-`must` functions use it: a failure is a panic, which the
/// template engine reports as the function's error.
fn must(expr: &str) -> Result<::regex::Regex, FuncError> {
    compile(expr).map_err(|e| FuncError(format!("regexp: Compile({}): {e}", go_regexp_quote(expr))))
}

/// Go's `FindAllString(s, n)`: `n < 0` all matches, else at most `n`; empty matches directly
/// after a previous match are skipped (both libraries agree on that).
fn find_all(re: &::regex::Regex, s: &str, n: i64) -> Vec<(usize, usize)> {
    if n == 0 {
        return vec![];
    }
    let mut out = Vec::new();
    for m in re.find_iter(s) {
        if n > 0 && out.len() as i64 >= n {
            break;
        }
        out.push((m.start(), m.end()));
    }
    out
}

/// Go's `Regexp.Expand` template syntax (`$1`, `${1}`, `$name`, `${name}`, `$$`); a malformed
/// reference keeps its `$` as text, where the `regex` crate would drop it.
fn go_expand(dst: &mut String, template: &str, caps: &::regex::Captures<'_>, names: &[Option<&str>]) {
    let mut t = template;
    while let Some(pos) = t.find('$') {
        dst.push_str(&t[..pos]);
        t = &t[pos + 1..];
        if let Some(rest) = t.strip_prefix('$') {
            dst.push('$');
            t = rest;
            continue;
        }
        let (brace, body) = match t.strip_prefix('{') {
            Some(b) => (true, b),
            None => (false, t),
        };
        let name_len: usize = body
            .chars()
            .take_while(|&c| super::strings::go_is_letter(c) || super::strings::go_is_digit(c) || c == '_')
            .map(char::len_utf8)
            .sum();
        if name_len == 0 || (brace && !body[name_len..].starts_with('}')) {
            dst.push('$');
            continue;
        }
        let name = &body[..name_len];
        t = &body[name_len + usize::from(brace)..];
        let num = if name.bytes().all(|b| b.is_ascii_digit()) && !(name.starts_with('0') && name.len() > 1) {
            name.parse::<usize>().ok()
        } else {
            None
        };
        let group = match num {
            Some(n) => caps.get(n),
            None => names
                .iter()
                .position(|n| *n == Some(name))
                .and_then(|i| caps.get(i)),
        };
        if let Some(m) = group {
            dst.push_str(m.as_str());
        }
    }
    dst.push_str(t);
}

/// Go's `ReplaceAllString` (template expansion with Go's rules).
fn replace_all_go(re: &::regex::Regex, s: &str, repl: &str) -> String {
    let names: Vec<Option<&str>> = re.capture_names().collect();
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for caps in re.captures_iter(s) {
        let Some(m) = caps.get(0) else { continue };
        out.push_str(&s[last..m.start()]);
        go_expand(&mut out, repl, &caps, &names);
        last = m.end();
    }
    out.push_str(&s[last..]);
    out
}

/// Go's `Regexp.Split(s, n)`.
fn go_regex_split(re: &::regex::Regex, expr: &str, s: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return vec![];
    }
    if !expr.is_empty() && s.is_empty() {
        return vec![String::new()];
    }
    let matches = find_all(re, s, n);
    let mut out = Vec::new();
    let (mut beg, mut end) = (0usize, 0usize);
    for (a, b) in matches {
        if n > 0 && out.len() as i64 == n - 1 {
            break;
        }
        end = a;
        if b != 0 {
            out.push(s[beg..end].to_string());
        }
        beg = b;
    }
    if end != s.len() {
        out.push(s[beg..].to_string());
    }
    out
}

fn str_list(v: Vec<String>) -> Value {
    Value::typed_list(ElemType::String, v.into_iter().map(Value::str).collect())
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("regexMatch", sig(&[P::String, P::String]), |_, a| {
        let (expr, s) = (a_str(a, 0)?, a_str(a, 1)?);
        // regexp.MatchString: a compile error is returned (and ignored by Sprig) → false.
        let ok = compile(expr).is_ok_and(|re| re.is_match(s));
        Ok(Value::Bool(ok))
    });
    m.insert("regexFindAll", sig(&[P::String, P::String, P::Int]), |_, a| {
        let (expr, s, n) = (a_str(a, 0)?, a_str(a, 1)?, a_int(a, 2)?);
        let re = must(expr)?;
        Ok(str_list(
            find_all(&re, s, n)
                .into_iter()
                .map(|(x, y)| s[x..y].to_string())
                .collect(),
        ))
    });
    m.insert("regexFind", sig(&[P::String, P::String]), |_, a| {
        let (expr, s) = (a_str(a, 0)?, a_str(a, 1)?);
        let re = must(expr)?;
        Ok(Value::str(re.find(s).map(|m| m.as_str()).unwrap_or("")))
    });
    m.insert(
        "regexReplaceAll",
        sig(&[P::String, P::String, P::String]),
        |_, a| {
            let (expr, s, repl) = (a_str(a, 0)?, a_str(a, 1)?, a_str(a, 2)?);
            let re = must(expr)?;
            Ok(Value::str(replace_all_go(&re, s, repl)))
        },
    );
    m.insert(
        "regexReplaceAllLiteral",
        sig(&[P::String, P::String, P::String]),
        |_, a| {
            let (expr, s, repl) = (a_str(a, 0)?, a_str(a, 1)?, a_str(a, 2)?);
            let re = must(expr)?;
            Ok(Value::str(
                re.replace_all(s, ::regex::NoExpand(repl)).into_owned(),
            ))
        },
    );
    m.insert("regexSplit", sig(&[P::String, P::String, P::Int]), |_, a| {
        let (expr, s, n) = (a_str(a, 0)?, a_str(a, 1)?, a_int(a, 2)?);
        let re = must(expr)?;
        Ok(str_list(go_regex_split(&re, expr, s, n)))
    });
}
