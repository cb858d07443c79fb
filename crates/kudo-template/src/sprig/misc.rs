//! Defaults, reflection, JSON, encodings, hashes, flow control and network (Sprig
//! `defaults.go`, `reflect.go`, `strings.go` encoders, `crypto.go` hashes, `network.go`).

use sha1::Digest;

use super::{a_any, a_bool, a_str, deep_equal, is_empty, sig, var};
use crate::func::ParamType as P;
use crate::func::{FuncError, FuncMap};
use crate::value::Value;

/// `encoding/json` string escaping with Go's default HTML-safe escapes.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `json.Marshal` (indent `None`) / `json.MarshalIndent(v, "", indent)`.
pub(crate) fn to_json(v: &Value, indent: Option<&str>) -> Result<String, String> {
    let mut out = String::new();
    json_value(&mut out, v, indent, 0)?;
    Ok(out)
}

fn newline(out: &mut String, indent: Option<&str>, depth: usize) {
    if let Some(ind) = indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn json_value(out: &mut String, v: &Value, indent: Option<&str>, depth: usize) -> Result<(), String> {
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => out.push_str(&i.to_string()),
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(format!(
                    "json: unsupported value: {}",
                    super::conv::format_float_g(*f)
                ));
            }
            out.push_str(&super::conv::format_float_json(*f));
        }
        Value::String(s) => json_string(out, s),
        Value::List(l) => {
            if l.items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, it) in l.items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                json_value(out, it, indent, depth + 1)?;
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Map(m) => {
            let m = m.entries.borrow();
            if m.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (k, it)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                json_string(out, k);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                json_value(out, it, indent, depth + 1)?;
            }
            newline(out, indent, depth);
            out.push('}');
        }
        Value::Object(o) => {
            if let Some(j) = super::dates::object_json(o.as_ref()) {
                out.push_str(&j);
            } else if let Some(j) = super::semver::object_json(o.as_ref()) {
                out.push_str(&j);
            } else if let Some(fields) = super::crypto::object_fields(o.as_ref()) {
                let m: std::collections::BTreeMap<String, Value> = fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Value::str(v)))
                    .collect();
                // Struct fields keep declaration order (Cert, Key), which is also sorted order.
                json_value(out, &Value::map(m), indent, depth)?;
            } else {
                json_string(out, &o.go_string());
            }
        }
    }
    Ok(())
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

pub(crate) fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for ch in data.chunks(3) {
        let b = [ch[0], *ch.get(1).unwrap_or(&0), *ch.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= ch.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Go's `base64.StdEncoding.DecodeString`, including its error offsets
/// (`illegal base64 data at input byte N`).
pub(crate) fn b64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let dec = |c: u8| B64.iter().position(|&x| x == c).map(|p| p as u32);
    let mut out = Vec::new();
    let mut si = 0usize;
    loop {
        let mut dbuf = [0u32; 4];
        let mut dlen = 4;
        let mut j = 0usize;
        let mut err: Option<usize> = None;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = dec(c) {
                dbuf[j] = v;
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                si += 1;
            }
            if si < src.len() {
                err = Some(si);
            }
            dlen = j;
            break;
        }
        let val = dbuf[0] << 18 | dbuf[1] << 12 | dbuf[2] << 6 | dbuf[3];
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..dlen - 1]);
        if let Some(e) = err {
            return Err(e);
        }
        if dlen < 4 {
            return Ok(out);
        }
    }
}

pub(crate) fn b32_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for ch in data.chunks(5) {
        let mut b = [0u8; 5];
        b[..ch.len()].copy_from_slice(ch);
        let n = b.iter().fold(0u64, |acc, &x| acc << 8 | x as u64);
        let nchars = match ch.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for i in 0..8 {
            if i < nchars {
                out.push(B32[(n >> (35 - 5 * i) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Go's `base32.StdEncoding.DecodeString` (newlines stripped first), with Go's error offsets.
pub(crate) fn b32_decode(s: &[u8]) -> Result<Vec<u8>, usize> {
    let src: Vec<u8> = s.iter().copied().filter(|&c| c != b'\n' && c != b'\r').collect();
    let olen = src.len();
    let dec = |c: u8| B32.iter().position(|&x| x == c).map(|p| p as u64);
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut end = false;
    while pos < olen && !end {
        let mut dbuf = [0u64; 8];
        let mut dlen = 8;
        let mut j = 0;
        while j < 8 {
            if pos == olen {
                return Err(olen - (olen - pos) - j);
            }
            let c = src[pos];
            pos += 1;
            let remaining = olen - pos;
            if c == b'=' && j >= 2 && remaining < 8 {
                if remaining + j < 7 {
                    return Err(olen);
                }
                for k in 0..(7 - j) {
                    if remaining > k && src[pos + k] != b'=' {
                        return Err(olen - remaining + k - 1);
                    }
                }
                dlen = j;
                end = true;
                if dlen == 1 || dlen == 3 || dlen == 6 {
                    return Err(olen - remaining - 1);
                }
                break;
            }
            match dec(c) {
                Some(v) => dbuf[j] = v,
                None => return Err(olen - remaining - 1),
            }
            j += 1;
        }
        let n = dbuf.iter().fold(0u64, |acc, &x| acc << 5 | x);
        let bytes = [
            (n >> 32) as u8,
            (n >> 24) as u8,
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
        ];
        let nb = match dlen {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => 0,
        };
        out.extend_from_slice(&bytes[..nb]);
    }
    Ok(out)
}

fn adler32(data: &[u8]) -> u32 {
    let mut a = adler2::Adler32::new();
    a.write_slice(data);
    a.checksum()
}

pub(super) fn register(m: &mut FuncMap) {
    m.insert("default", var(&[P::Any], P::Any), |_, a| {
        let given = a.get(1);
        Ok(match given {
            Some(g) if !is_empty(g) => g.clone(),
            _ => a_any(a, 0).clone(),
        })
    });
    m.insert("empty", sig(&[P::Any]), |_, a| {
        Ok(Value::Bool(is_empty(a_any(a, 0))))
    });
    m.insert("coalesce", var(&[], P::Any), |_, a| {
        Ok(a.iter().find(|v| !is_empty(v)).cloned().unwrap_or(Value::Nil))
    });
    m.insert("ternary", sig(&[P::Any, P::Any, P::Bool]), |_, a| {
        Ok(if a_bool(a, 2)? {
            a_any(a, 0).clone()
        } else {
            a_any(a, 1).clone()
        })
    });
    m.insert("typeOf", sig(&[P::Any]), |_, a| {
        Ok(Value::str(a_any(a, 0).type_name()))
    });
    m.insert("typeIs", sig(&[P::String, P::Any]), |_, a| {
        Ok(Value::Bool(a_str(a, 0)? == a_any(a, 1).type_name()))
    });
    m.insert("typeIsLike", sig(&[P::String, P::Any]), |_, a| {
        let (t, n) = (a_str(a, 0)?, a_any(a, 1).type_name());
        Ok(Value::Bool(t == n || format!("*{t}") == n))
    });
    m.insert("kindOf", sig(&[P::Any]), |_, a| {
        Ok(Value::str(a_any(a, 0).kind_name()))
    });
    m.insert("kindIs", sig(&[P::String, P::Any]), |_, a| {
        Ok(Value::Bool(a_str(a, 0)? == a_any(a, 1).kind_name()))
    });
    m.insert("deepEqual", sig(&[P::Any, P::Any]), |_, a| {
        Ok(Value::Bool(deep_equal(a_any(a, 0), a_any(a, 1))))
    });
    m.insert("toJson", sig(&[P::Any]), |_, a| {
        Ok(Value::str(to_json(a_any(a, 0), None).unwrap_or_default()))
    });
    m.insert("toPrettyJson", sig(&[P::Any]), |_, a| {
        Ok(Value::str(to_json(a_any(a, 0), Some("  ")).unwrap_or_default()))
    });
    m.insert("fail", sig(&[P::String]), |_, a| {
        Err(FuncError(a_str(a, 0)?.to_string()))
    });
    m.insert("b64enc", sig(&[P::String]), |_, a| {
        Ok(Value::str(b64_encode(a_str(a, 0)?.as_bytes())))
    });
    m.insert("b64dec", sig(&[P::String]), |_, a| {
        Ok(Value::str(match b64_decode(a_str(a, 0)?.as_bytes()) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(at) => format!("illegal base64 data at input byte {at}"),
        }))
    });
    m.insert("b32enc", sig(&[P::String]), |_, a| {
        Ok(Value::str(b32_encode(a_str(a, 0)?.as_bytes())))
    });
    m.insert("b32dec", sig(&[P::String]), |_, a| {
        Ok(Value::str(match b32_decode(a_str(a, 0)?.as_bytes()) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(at) => format!("illegal base32 data at input byte {at}"),
        }))
    });
    m.insert("sha1sum", sig(&[P::String]), |_, a| {
        Ok(Value::str(hex::encode(sha1::Sha1::digest(
            a_str(a, 0)?.as_bytes(),
        ))))
    });
    m.insert("sha256sum", sig(&[P::String]), |_, a| {
        Ok(Value::str(hex::encode(sha2::Sha256::digest(
            a_str(a, 0)?.as_bytes(),
        ))))
    });
    m.insert("adler32sum", sig(&[P::String]), |_, a| {
        Ok(Value::str(adler32(a_str(a, 0)?.as_bytes()).to_string()))
    });
    m.insert("getHostByName", sig(&[P::String]), |_, a| {
        Err(FuncError(format!(
            "getHostByName is not supported by kudo-rs: templates may not use the network (looking up {:?})",
            a_str(a, 0)?
        )))
    });
}
