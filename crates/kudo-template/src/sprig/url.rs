//! `urlParse` / `urlJoin` (Sprig `url.go`) with Go `net/url` semantics.
//!
//! The `url` crate follows the WHATWG URL standard (normalises paths, lowercases hosts, requires
//! a scheme); Go's parser is a lenient RFC 3986 splitter, so its rules are reproduced here.

use std::collections::BTreeMap;

use super::conv::go_quote;
use super::{a_map, a_str, sig};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::Value;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    UserPassword,
    Fragment,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if mode == Mode::Host
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => {
            return match mode {
                Mode::Path => c == b'?',
                Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
                Mode::Fragment => false,
                Mode::Host => true,
            };
        }
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if should_escape(c, mode) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(c as char);
        }
    }
    out
}

fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                n += 1;
                if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                    let end = (i + 3).min(b.len());
                    return Err(format!(
                        "invalid URL escape {}",
                        go_quote(&String::from_utf8_lossy(&b[i..end]))
                    ));
                }
                if mode == Mode::Host && hexval(b[i + 1]) < 8 && &s[i..i + 3] != "%25" {
                    return Err(format!("invalid URL escape {}", go_quote(&s[i..i + 3])));
                }
                i += 3;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {} in host name",
                        go_quote(&s[i..i + 1])
                    ));
                }
                i += 1;
            }
        }
    }
    if n == 0 {
        return Ok(s.to_string());
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(hexval(b[i + 1]) << 4 | hexval(b[i + 2]));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn hexval(c: u8) -> u8 {
    (c as char).to_digit(16).unwrap_or(0) as u8
}

#[derive(Default)]
struct GoUrl {
    scheme: String,
    opaque: String,
    user: Option<(String, Option<String>)>,
    host: String,
    path: String,
    raw_query: String,
    fragment: String,
}

fn user_string(u: &(String, Option<String>)) -> String {
    let mut s = escape(&u.0, Mode::UserPassword);
    if let Some(p) = &u.1 {
        s.push(':');
        s.push_str(&escape(p, Mode::UserPassword));
    }
    s
}

fn get_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok(("", raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err("missing protocol scheme".into());
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn valid_optional_port(p: &str) -> bool {
    p.is_empty() || (p.starts_with(':') && p[1..].bytes().all(|c| c.is_ascii_digit()))
}

fn parse_host(host: &str) -> Result<String, String> {
    if host.starts_with('[') {
        let i = host.rfind(']').ok_or("missing ']' in host")?;
        let port = &host[i + 1..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {} after host", go_quote(port)));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {} after host", go_quote(port)));
        }
    }
    unescape(host, Mode::Host)
}

fn valid_userinfo(s: &str) -> bool {
    s.chars().all(|r| {
        r.is_ascii_alphanumeric()
            || matches!(
                r,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    })
}

/// Go's `url.Parse`; the error is the inner error text (without the `parse "…": ` wrapper).
fn parse(raw: &str) -> Result<GoUrl, String> {
    let (u, frag) = match raw.split_once('#') {
        Some((a, b)) => (a, Some(b)),
        None => (raw, None),
    };
    let mut url = parse_no_frag(u).map_err(|e| format!("parse {}: {e}", go_quote(u)))?;
    if let Some(f) = frag {
        url.fragment = unescape(f, Mode::Fragment).map_err(|e| format!("parse {}: {e}", go_quote(raw)))?;
    }
    Ok(url)
}

fn parse_no_frag(raw: &str) -> Result<GoUrl, String> {
    if raw.bytes().any(|c| c < 0x20 || c == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let mut url = GoUrl::default();
    if raw == "*" {
        url.path = "*".into();
        return Ok(url);
    }
    let (scheme, rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    let mut rest = rest.to_string();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest.pop();
    } else if let Some((a, q)) = rest.clone().split_once('?') {
        url.raw_query = q.to_string();
        rest = a.to_string();
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            url.opaque = rest;
            return Ok(url);
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let mut authority = rest[2..].to_string();
        let mut path = String::new();
        if let Some(i) = authority.find('/') {
            path = authority[i..].to_string();
            authority.truncate(i);
        }
        let (user, host) = match authority.rfind('@') {
            None => (None, parse_host(&authority)?),
            Some(i) => {
                let host = parse_host(&authority[i + 1..])?;
                let ui = &authority[..i];
                if !valid_userinfo(ui) {
                    return Err("net/url: invalid userinfo".into());
                }
                let user = match ui.split_once(':') {
                    None => (unescape(ui, Mode::UserPassword)?, None),
                    Some((u, p)) => (
                        unescape(u, Mode::UserPassword)?,
                        Some(unescape(p, Mode::UserPassword)?),
                    ),
                };
                (Some(user), host)
            }
        };
        url.user = user;
        url.host = host;
        rest = path;
    }
    url.path = unescape(&rest, Mode::Path)?;
    Ok(url)
}

fn hostname(host: &str) -> String {
    let (h, _) = split_host_port(host);
    h.strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(h)
        .to_string()
}

fn split_host_port(host: &str) -> (&str, &str) {
    let colon = host.rfind(':');
    match colon {
        Some(i) if valid_optional_port(&host[i..]) => {
            let h = &host[..i];
            if host.starts_with('[') && !h.ends_with(']') && h.contains(']') {
                (host, "")
            } else {
                (h, &host[i + 1..])
            }
        }
        _ => (host, ""),
    }
}

fn url_string(u: &GoUrl) -> String {
    let mut buf = String::new();
    if !u.scheme.is_empty() {
        buf.push_str(&u.scheme);
        buf.push(':');
    }
    if !u.opaque.is_empty() {
        buf.push_str(&u.opaque);
    } else {
        if !u.scheme.is_empty() || !u.host.is_empty() || u.user.is_some() {
            if !u.host.is_empty() || !u.path.is_empty() || u.user.is_some() {
                buf.push_str("//");
            }
            if let Some(ui) = &u.user {
                buf.push_str(&user_string(ui));
                buf.push('@');
            }
            if !u.host.is_empty() {
                buf.push_str(&escape(&u.host, Mode::Host));
            }
        }
        let path = if u.path == "*" {
            "*".to_string()
        } else {
            escape(&u.path, Mode::Path)
        };
        if !path.is_empty() && !path.starts_with('/') && !u.host.is_empty() {
            buf.push('/');
        }
        if buf.is_empty() && path.split('/').next().unwrap_or("").contains(':') {
            buf.push_str("./");
        }
        buf.push_str(&path);
    }
    if !u.raw_query.is_empty() {
        buf.push('?');
        buf.push_str(&u.raw_query);
    }
    if !u.fragment.is_empty() {
        buf.push('#');
        buf.push_str(&escape(&u.fragment, Mode::Fragment));
    }
    buf
}

/// Sprig's `dictGetOrEmpty`: absent → "", a non-string value panics.
fn dict_str(d: &BTreeMap<String, Value>, key: &str) -> Result<String, FuncError> {
    match d.get(key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.to_string()),
        Some(Value::Nil) => Err(FuncError(
            "runtime error: invalid memory address or nil pointer dereference".into(),
        )),
        Some(v) => Err(FuncError(format!(
            "unable to parse {key} key, must be of type string, but {} found",
            v.kind_name()
        ))),
    }
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("urlParse", sig(&[P::String]), |_, a| {
        let u = parse(a_str(a, 0)?).map_err(|e| FuncError(format!("unable to parse url: {e}")))?;
        let mut d = BTreeMap::new();
        d.insert("scheme".into(), Value::str(u.scheme.as_str()));
        d.insert("host".into(), Value::str(u.host.as_str()));
        d.insert("hostname".into(), Value::str(hostname(&u.host)));
        d.insert("path".into(), Value::str(u.path.as_str()));
        d.insert("query".into(), Value::str(u.raw_query.as_str()));
        d.insert("opaque".into(), Value::str(u.opaque.as_str()));
        d.insert("fragment".into(), Value::str(u.fragment.as_str()));
        d.insert(
            "userinfo".into(),
            Value::str(u.user.as_ref().map(user_string).unwrap_or_default()),
        );
        Ok(Value::map(d))
    });
    m.insert("urlJoin", sig(&[P::MapAny]), |_, a| {
        let d = a_map(a, 0)?.entries.borrow();
        let mut u = GoUrl {
            scheme: dict_str(&d, "scheme")?,
            host: dict_str(&d, "host")?,
            path: dict_str(&d, "path")?,
            raw_query: dict_str(&d, "query")?,
            opaque: dict_str(&d, "opaque")?,
            fragment: dict_str(&d, "fragment")?,
            user: None,
        };
        let ui = dict_str(&d, "userinfo")?;
        if !ui.is_empty() {
            let tmp = parse(&format!("proto://{ui}@host"))
                .map_err(|e| FuncError(format!("unable to parse userinfo in dict: {e}")))?;
            u.user = tmp.user;
        }
        Ok(Value::str(url_string(&u)))
    });
}
