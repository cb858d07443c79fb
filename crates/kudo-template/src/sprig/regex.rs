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
    let can_backquote =
        !s.chars().any(|c| c == '`' || c == '\u{feff}' || (c.is_control() && c != '\t'));
    if can_backquote { format!("`{s}`") } else { super::conv::go_quote(s) }
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
                    && !matches!(c, 'a' | 'f' | 't' | 'n' | 'r' | 'v' | 'x' | 'p' | 'P' | 'A' | 'z' | '0' | 'b' | 'B' | 'C') =>
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
    let t = translate(expr)?;
    ::regex::RegexBuilder::new(&t).build().map_err(|e| {
        let msg = e.to_string();
        if msg.contains("repetition operator missing expression") {
            perr("missing argument to repetition operator", &rep_op(expr))
        } else if msg.contains("invalid repetition count range") || msg.contains("repetition quantifier") {
            perr("invalid repeat count", &rep_count(expr))
        } else {
            let detail = msg.lines().rev().find(|l| l.starts_with("error:")).unwrap_or("invalid syntax");
            format!("error parsing regexp: {}: `{expr}`", detail.trim_start_matches("error: "))
        }
    })
}

fn rep_op(expr: &str) -> String {
    expr.chars().find(|c| matches!(c, '*' | '+' | '?' | '{')).map(String::from).unwrap_or_default()
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

/// Detects Go's nested repetition error (`a**`), which the crate accepts.
fn nested_rep(expr: &str) -> Option<String> {
    let b: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut in_class = false;
    while i + 1 < b.len() {
        match b[i] {
            '\\' => {
                i += 2;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            c @ ('*' | '+' | '?') if !in_class => {
                let n = b[i + 1];
                if matches!(n, '*' | '+') || (n == '?' && b.get(i + 2).is_some_and(|x| matches!(x, '*' | '+' | '?'))) {
                    return Some(format!("{c}{n}"));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn must_go(expr: &str) -> Result<::regex::Regex, FuncError> {
    if let Some(op) = nested_rep(expr) {
        return Err(FuncError(format!(
            "regexp: Compile({}): {}",
            go_regexp_quote(expr),
            perr("invalid nested repetition operator", &op)
        )));
    }
    must(expr)
}

/// Go's `FindAllString(s, n)`: `n < 0` all matches, else at most `n`; empty matches directly
/// after a previous match are skipped (both libraries agree on that).
fn find_all<'a>(re: &::regex::Regex, s: &'a str, n: i64) -> Vec<(usize, usize)> {
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
        let ok = nested_rep(expr).is_none() && compile(expr).is_ok_and(|re| re.is_match(s));
        Ok(Value::Bool(ok))
    });
    m.insert("regexFindAll", sig(&[P::String, P::String, P::Int]), |_, a| {
        let (expr, s, n) = (a_str(a, 0)?, a_str(a, 1)?, a_int(a, 2)?);
        let re = must_go(expr)?;
        Ok(str_list(find_all(&re, s, n).into_iter().map(|(x, y)| s[x..y].to_string()).collect()))
    });
    m.insert("regexFind", sig(&[P::String, P::String]), |_, a| {
        let (expr, s) = (a_str(a, 0)?, a_str(a, 1)?);
        let re = must_go(expr)?;
        Ok(Value::str(re.find(s).map(|m| m.as_str()).unwrap_or("")))
    });
    m.insert("regexReplaceAll", sig(&[P::String, P::String, P::String]), |_, a| {
        let (expr, s, repl) = (a_str(a, 0)?, a_str(a, 1)?, a_str(a, 2)?);
        let re = must_go(expr)?;
        Ok(Value::str(re.replace_all(s, repl).into_owned()))
    });
    m.insert("regexReplaceAllLiteral", sig(&[P::String, P::String, P::String]), |_, a| {
        let (expr, s, repl) = (a_str(a, 0)?, a_str(a, 1)?, a_str(a, 2)?);
        let re = must_go(expr)?;
        Ok(Value::str(re.replace_all(s, ::regex::NoExpand(repl)).into_owned()))
    });
    m.insert("regexSplit", sig(&[P::String, P::String, P::Int]), |_, a| {
        let (expr, s, n) = (a_str(a, 0)?, a_str(a, 1)?, a_int(a, 2)?);
        let re = must_go(expr)?;
        Ok(str_list(go_regex_split(&re, expr, s, n)))
    });
}
