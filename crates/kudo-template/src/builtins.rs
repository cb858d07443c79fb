//! Go `text/template` builtin functions (`eq`, `index`, `len`, `printf`, …) with Go 1.19's
//! semantics and error messages. `and`/`or` are handled by the executor because they short-circuit.

use std::cmp::Ordering;

use crate::exec::{State, Val};
use crate::func::FuncError;
use crate::gofmt;
use crate::value::{ElemType, Value};

/// Go's template truth: false for nil, zero numbers, empty strings/collections.
pub(crate) fn truth(v: &Value) -> bool {
    match v {
        Value::Nil => false,
        Value::Bool(b) => *b,
        Value::Int(i) | Value::Int64(i) => *i != 0,
        Value::Float(f) => *f != 0.0,
        Value::String(s) => !s.is_empty(),
        Value::List(l) => !l.items.is_empty(),
        Value::Map(m) => !m.entries.borrow().is_empty(),
        Value::Object(_) => true,
    }
}

type BR = Result<Val, FuncError>;

fn err<T>(msg: impl Into<String>) -> Result<T, FuncError> {
    Err(FuncError(msg.into()))
}

pub(crate) fn call_builtin(_s: &mut State<'_, '_>, name: &str, argv: Vec<Val>) -> BR {
    match name {
        "not" => Ok(Val::new(Value::Bool(!truth(&argv[0].v)))),
        "len" => length(&argv[0]),
        "index" => index(&argv[0], &argv[1..]),
        "slice" => slice(&argv[0], &argv[1..]),
        "print" => Ok(Val::new(Value::str(gofmt::sprint_args(&values(argv))))),
        "println" => Ok(Val::new(Value::str(gofmt::sprintln(&values(argv))))),
        "printf" => {
            let vals = values(argv);
            let f = vals[0].as_str().unwrap_or_default().to_string();
            Ok(Val::new(Value::str(gofmt::sprintf(&f, &vals[1..]))))
        }
        "html" => Ok(Val::new(Value::str(html_escape(&eval_args(argv))))),
        "js" => Ok(Val::new(Value::str(js_escape(&eval_args(argv))))),
        "urlquery" => Ok(Val::new(Value::str(query_escape(&eval_args(argv))))),
        "eq" => eq(&argv[0].v, &argv[1..]).map(|b| Val::new(Value::Bool(b))),
        "ne" => eq(&argv[0].v, &argv[1..2]).map(|b| Val::new(Value::Bool(!b))),
        "lt" => lt(&argv[0].v, &argv[1].v).map(|b| Val::new(Value::Bool(b))),
        "le" => le(&argv[0].v, &argv[1].v).map(|b| Val::new(Value::Bool(b))),
        "gt" => le(&argv[0].v, &argv[1].v).map(|b| Val::new(Value::Bool(!b))),
        "ge" => lt(&argv[0].v, &argv[1].v).map(|b| Val::new(Value::Bool(!b))),
        "call" => call(&argv[0]),
        _ => err(format!("unknown builtin {name}")),
    }
}

fn values(argv: Vec<Val>) -> Vec<Value> {
    argv.into_iter().map(|v| v.v).collect()
}

fn length(item: &Val) -> BR {
    if item.is_invalid() {
        return err("reflect: call of reflect.Value.Type on zero Value");
    }
    let n = match &item.v {
        Value::Nil => return err("len of nil pointer"),
        Value::String(s) => s.len(),
        Value::List(l) => l.items.len(),
        Value::Map(m) => m.entries.borrow().len(),
        v => return err(format!("len of type {}", v.type_name())),
    };
    Ok(Val::new(Value::Int(n as i64)))
}

/// Go's `indexArg`: an integer index within `0..=cap`.
fn index_arg(index: &Val, cap: usize) -> Result<usize, FuncError> {
    let x = match &index.v {
        Value::Int(i) | Value::Int64(i) if !index.iface => *i,
        Value::Nil if !index.iface => return err("cannot index slice/array with nil"),
        _ => {
            return err(format!(
                "cannot index slice/array with type {}",
                index.static_type()
            ));
        }
    };
    if x < 0 || x as u64 > cap as u64 {
        return err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

fn elem_zero(e: ElemType) -> Val {
    match e {
        ElemType::Interface => Val {
            v: Value::Nil,
            iface: true,
        },
        ElemType::String => Val::new(Value::str("")),
        ElemType::Int | ElemType::Uint8 => Val::new(Value::Int(0)),
        ElemType::Int64 => Val::new(Value::Int64(0)),
        ElemType::Float64 => Val::new(Value::Float(0.0)),
        ElemType::Bool => Val::new(Value::Bool(false)),
    }
}

fn index(item: &Val, indexes: &[Val]) -> BR {
    if item.is_invalid() || matches!(item.v, Value::Nil) {
        return err("index of untyped nil");
    }
    let mut item = Val::new(item.v.clone());
    for idx in indexes {
        let idx = Val::new(idx.v.clone());
        if matches!(item.v, Value::Nil) {
            return err("index of nil pointer");
        }
        item = match &item.v {
            Value::List(l) => {
                let x = index_arg(&idx, l.items.len())?;
                match l.items.get(x) {
                    Some(v) => Val {
                        v: v.clone(),
                        iface: l.elem == ElemType::Interface,
                    },
                    None => return err("reflect: slice index out of range"),
                }
            }
            Value::String(s) => {
                let x = index_arg(&idx, s.len())?;
                match s.as_bytes().get(x) {
                    Some(b) => Val::new(Value::Int(*b as i64)),
                    None => return err("reflect: string index out of range"),
                }
            }
            Value::Map(m) => {
                let key = match &idx.v {
                    Value::String(k) => k.clone(),
                    Value::Nil => return err("value is nil; should be of type string"),
                    v => return err(format!("value has type {}; should be string", v.type_name())),
                };
                let found = m.entries.borrow().get(&*key).cloned();
                match found {
                    Some(v) => Val {
                        v,
                        iface: m.elem == ElemType::Interface,
                    },
                    None => elem_zero(m.elem),
                }
            }
            v => return err(format!("can't index item of type {}", v.type_name())),
        };
    }
    Ok(item)
}

fn slice(item: &Val, indexes: &[Val]) -> BR {
    if matches!(item.v, Value::Nil) {
        return err("slice of untyped nil");
    }
    if indexes.len() > 3 {
        return err(format!("too many slice indexes: {}", indexes.len()));
    }
    let (len, is_str) = match &item.v {
        Value::String(s) => {
            if indexes.len() == 3 {
                return err("cannot 3-index slice a string");
            }
            (s.len(), true)
        }
        Value::List(l) => (l.items.len(), false),
        v => return err(format!("can't slice item of type {}", v.type_name())),
    };
    let mut idx = [0usize, len, 0];
    for (i, x) in indexes.iter().enumerate() {
        idx[i] = index_arg(x, len)?;
    }
    if idx[0] > idx[1] {
        return err(format!("invalid slice index: {} > {}", idx[0], idx[1]));
    }
    if indexes.len() == 3 && idx[1] > idx[2] {
        return err(format!("invalid slice index: {} > {}", idx[1], idx[2]));
    }
    if is_str {
        let Value::String(s) = &item.v else {
            return err("internal error");
        };
        let bytes = &s.as_bytes()[idx[0]..idx[1]];
        return Ok(Val::new(Value::str(String::from_utf8_lossy(bytes).as_ref())));
    }
    let Value::List(l) = &item.v else {
        return err("internal error");
    };
    Ok(Val::new(Value::typed_list(
        l.elem,
        l.items[idx[0]..idx[1]].to_vec(),
    )))
}

fn call(f: &Val) -> BR {
    match &f.v {
        Value::Nil => err("call of nil"),
        v => err(format!("non-function of type {}", v.type_name())),
    }
}

/// `evalArgs` of html/js/urlquery: one string passes through; otherwise Sprint with nil shown as
/// `<no value>`.
fn eval_args(argv: Vec<Val>) -> String {
    if argv.len() == 1
        && let Value::String(s) = &argv[0].v
    {
        return s.to_string();
    }
    let vals: Vec<Value> = argv
        .into_iter()
        .map(|a| {
            if matches!(a.v, Value::Nil) {
                Value::str("<no value>")
            } else {
                a.v
            }
        })
        .collect();
    gofmt::sprint_args(&vals)
}

pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\0' => out.push('\u{FFFD}'),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

pub(crate) fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u00{:02X}", c as u32)),
            c if (c as u32) < 0x80 => out.push(c),
            c if gofmt::is_print(c) => out.push(c),
            c => out.push_str(&format!("\\u{:04X}", c as u32)),
        }
    }
    out
}

pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Invalid,
    Bool,
    Int,
    Float,
    String,
}

fn basic_kind(v: &Value) -> Kind {
    match v {
        Value::Bool(_) => Kind::Bool,
        Value::Int(_) | Value::Int64(_) => Kind::Int,
        Value::Float(_) => Kind::Float,
        Value::String(_) => Kind::String,
        _ => Kind::Invalid,
    }
}

/// Go's `reflect.Kind` name of a non-basic value, for `canCompare`.
fn reflect_kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "invalid",
        Value::List(_) => "slice",
        Value::Map(_) => "map",
        Value::Object(o) => o.kind(),
        other => other.kind_name(),
    }
}

fn comparable(v: &Value) -> bool {
    !matches!(v, Value::List(_) | Value::Map(_))
}

fn eq(a: &Value, rest: &[Val]) -> Result<bool, FuncError> {
    if rest.is_empty() {
        return err("missing argument for comparison");
    }
    let k1 = basic_kind(a);
    for b in rest {
        let b = &b.v;
        let k2 = basic_kind(b);
        let t = if k1 != k2 {
            if !matches!(a, Value::Nil) && !matches!(b, Value::Nil) {
                return err("incompatible types for comparison");
            }
            false
        } else {
            match (a, b) {
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => x == y,
                (Value::Float(x), Value::Float(y)) => x == y,
                (Value::String(x), Value::String(y)) => x == y,
                _ => {
                    let (ka, kb) = (reflect_kind(a), reflect_kind(b));
                    if ka != kb && ka != "invalid" && kb != "invalid" {
                        return err(format!(
                            "non-comparable types {}: {}, {}: {}",
                            gofmt::sprintf("%s", std::slice::from_ref(a)),
                            a.type_name(),
                            b.type_name(),
                            gofmt::sprint(b)
                        ));
                    }
                    let (na, nb) = (matches!(a, Value::Nil), matches!(b, Value::Nil));
                    if na || nb {
                        na == nb
                    } else {
                        if !comparable(b) {
                            return err(format!(
                                "non-comparable type {}: {}",
                                gofmt::sprintf("%s", std::slice::from_ref(b)),
                                b.type_name()
                            ));
                        }
                        match (a, b) {
                            (Value::Object(x), Value::Object(y)) => {
                                x.type_name() == y.type_name() && x.go_string() == y.go_string()
                            }
                            _ => false,
                        }
                    }
                }
            }
        };
        if t {
            return Ok(true);
        }
    }
    Ok(false)
}

fn lt(a: &Value, b: &Value) -> Result<bool, FuncError> {
    let k1 = basic_kind(a);
    if k1 == Kind::Invalid {
        return err("invalid type for comparison");
    }
    let k2 = basic_kind(b);
    if k2 == Kind::Invalid {
        return err("invalid type for comparison");
    }
    if k1 != k2 {
        return err("incompatible types for comparison");
    }
    Ok(match (a, b) {
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => x < y,
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y) == Some(Ordering::Less),
        (Value::String(x), Value::String(y)) => x.as_bytes() < y.as_bytes(),
        _ => return err("invalid type for comparison"),
    })
}

fn le(a: &Value, b: &Value) -> Result<bool, FuncError> {
    if lt(a, b)? {
        return Ok(true);
    }
    eq(a, &[Val::new(b.clone())])
}
