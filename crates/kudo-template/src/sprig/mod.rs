//! The function map KUDO v0.19 renders with: Sprig's generic function names (v2.22 set) with the
//! behaviour of Sprig v3.2.3 + spf13/cast 1.5.0 (the reference oracle), minus `env expandenv base
//! dir clean ext isAbs`, plus KUDO's `toYaml`.
//!
//! Every function is declared with the Go signature Sprig gives it, so the engine converts and
//! checks arguments the way Go's reflection-based call does, and every result carries the Go type
//! Sprig returns (`[]int` from `until`, `int64` from `add`, `map[string]string` from `split`…),
//! because `printf "%T"`, `typeOf` and later argument conversion observe it. Sprig's `slice`
//! shadows Go's builtin of the same name, as it does in Go (function maps win over builtins).
//!
//! Deliberate or structural differences from Go/Sprig (everything else is checked against the
//! oracle in `tests/sprig.rs`):
//! * randomness (`rand*`, `shuffle`, `uuidv4`, IVs, keys, serials) comes from the render's seeded
//!   generator instead of `crypto/rand`, so a plan run re-renders identically;
//! * `getHostByName` is refused (templates must not reach the network);
//! * `keys`/`values` return sorted key order (Go's map order is random);
//! * strings are UTF-8: where Go would produce invalid UTF-8 (byte-slicing `trunc`, `substr`,
//!   `abbrev`, `wrap` through a multi-byte character, `b64dec` of binary data) we produce U+FFFD;
//! * `genPrivateKey "dsa"` is not supported; certificate validity starts at the real clock;
//! * Go's typed nil slices do not exist here: `rest`/`initial` of an empty list and `concat` of
//!   nothing are empty lists (`toJson` prints `[]` where Go prints `null`);
//! * `time.Time` field `.Month`/`.Weekday` are plain strings (Go: `time.Month`/`time.Weekday`);
//! * list/string builders stop at `FuncEnv::max_items` elements/bytes with an error.

use std::sync::{Arc, OnceLock};

use crate::func::{FuncError, FuncMap, ParamType, Signature};
use crate::value::{Map, Value};

pub mod conv;
mod crypto;
mod dates;
mod dicts;
mod lists;
mod math;
mod misc;
mod random;
mod regex;
mod semver;
pub use semver::VersionRange;
mod strings;
mod url;

/// The function map KUDO v0.19 renders with. Built once per process.
pub fn kudo_funcs() -> Arc<FuncMap> {
    static FUNCS: OnceLock<Arc<FuncMap>> = OnceLock::new();
    FUNCS.get_or_init(|| Arc::new(build())).clone()
}

fn build() -> FuncMap {
    let mut m = FuncMap::new();
    strings::register(&mut m);
    math::register(&mut m);
    lists::register(&mut m);
    dicts::register(&mut m);
    misc::register(&mut m);
    regex::register(&mut m);
    dates::register(&mut m);
    semver::register(&mut m);
    url::register(&mut m);
    random::register(&mut m);
    crypto::register(&mut m);
    m.insert("toYaml", sig(&[ParamType::Any]), |_, a| {
        crate::yaml::to_yaml(&a[0])
            .map(Value::str)
            .map_err(|e| FuncError(e.to_string()))
    });
    m
}

/// Fixed-arity signature.
pub(crate) fn sig(p: &[ParamType]) -> Signature {
    Signature::new(p)
}

/// Variadic signature (`...T` after the fixed parameters).
pub(crate) fn var(p: &[ParamType], rest: ParamType) -> Signature {
    Signature::variadic(p, rest)
}

fn bad_arg(i: usize, want: &str, got: &Value) -> FuncError {
    FuncError(format!(
        "internal: argument {} should be {want}, got {}",
        i + 1,
        got.type_name()
    ))
}

/// Argument `i`, declared `string`.
pub(crate) fn a_str(a: &[Value], i: usize) -> Result<&str, FuncError> {
    match a.get(i) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(bad_arg(i, "string", v)),
        None => Err(FuncError(format!("internal: missing argument {}", i + 1))),
    }
}

/// Argument `i`, declared `int`/`int64`.
pub(crate) fn a_int(a: &[Value], i: usize) -> Result<i64, FuncError> {
    match a.get(i) {
        Some(Value::Int(n)) | Some(Value::Int64(n)) => Ok(*n),
        Some(v) => Err(bad_arg(i, "int", v)),
        None => Err(FuncError(format!("internal: missing argument {}", i + 1))),
    }
}

/// Argument `i`, declared `float64`.
pub(crate) fn a_f64(a: &[Value], i: usize) -> Result<f64, FuncError> {
    match a.get(i) {
        Some(Value::Float(f)) => Ok(*f),
        Some(Value::Int(n)) | Some(Value::Int64(n)) => Ok(*n as f64),
        Some(v) => Err(bad_arg(i, "float64", v)),
        None => Err(FuncError(format!("internal: missing argument {}", i + 1))),
    }
}

/// Argument `i`, declared `bool`.
pub(crate) fn a_bool(a: &[Value], i: usize) -> Result<bool, FuncError> {
    match a.get(i) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(bad_arg(i, "bool", v)),
        None => Err(FuncError(format!("internal: missing argument {}", i + 1))),
    }
}

/// Argument `i`, declared `map[string]interface{}`.
pub(crate) fn a_map(a: &[Value], i: usize) -> Result<&Map, FuncError> {
    match a.get(i) {
        Some(Value::Map(m)) => Ok(m),
        Some(v) => Err(bad_arg(i, "map", v)),
        None => Err(FuncError(format!("internal: missing argument {}", i + 1))),
    }
}

/// Argument `i` of any type (`interface{}`); a missing one is Go's nil.
pub(crate) fn a_any(a: &[Value], i: usize) -> &Value {
    a.get(i).unwrap_or(&Value::Nil)
}

/// `fmt.Sprint(v)` / `%v` — how Sprig's `strval` and `cat` stringify a value.
pub(crate) fn sprint(v: &Value) -> String {
    crate::gofmt::sprint(v)
}

/// Sprig's `strval`: strings as is, `fmt.Stringer`s via `String()`, anything else `%v`.
pub(crate) fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        other => sprint(other),
    }
}

/// Rejects a result larger than the per-call element limit, naming the limit.
pub(crate) fn check_items(env_max: usize, n: u128, what: &str) -> Result<(), FuncError> {
    if n > env_max as u128 {
        Err(FuncError(format!(
            "{what} would produce {n} elements, more than the limit of {env_max} (kudo-rs max_items)"
        )))
    } else {
        Ok(())
    }
}

/// Rejects a string result longer than the per-call limit (bytes), naming the limit.
pub(crate) fn check_bytes(env_max: usize, n: u128, what: &str) -> Result<(), FuncError> {
    if n > env_max as u128 {
        Err(FuncError(format!(
            "{what} would produce a string of {n} bytes, more than the limit of {env_max} (kudo-rs max_items)"
        )))
    } else {
        Ok(())
    }
}

/// Items of a slice value; `None` when the value is not a slice.
pub(crate) fn list_items(v: &Value) -> Option<&[Value]> {
    match v {
        Value::List(l) => Some(&l.items),
        _ => None,
    }
}

/// Go's `reflect.Kind` name of a value as Sprig's list errors print it (`Cannot push on type
/// int`); untyped nil panics in Go (`reflect.TypeOf(nil).Kind()`).
pub(crate) fn kind_or_nil_panic(v: &Value) -> Result<&'static str, FuncError> {
    match v {
        Value::Nil => Err(FuncError(
            "runtime error: invalid memory address or nil pointer dereference".into(),
        )),
        other => Ok(other.kind_name()),
    }
}

/// `reflect.DeepEqual` over template values: same Go type and deeply equal contents.
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Int64(x), Value::Int64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.elem == y.elem
                && x.items.len() == y.items.len()
                && x.items.iter().zip(y.items.iter()).all(|(p, q)| deep_equal(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            if x.elem != y.elem {
                return false;
            }
            if Rc::ptr_eq(&x.entries, &y.entries) {
                return true;
            }
            let (x, y) = (x.entries.borrow(), y.entries.borrow());
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.type_name() == y.type_name() && x.go_string() == y.go_string()
        }
        _ => false,
    }
}

use std::rc::Rc;

/// Sprig's `empty`: Go zero values (nil, false, 0, "", empty slice/map) are empty; structs never.
pub(crate) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Bool(b) => !b,
        Value::Int(i) | Value::Int64(i) => *i == 0,
        Value::Float(f) => *f == 0.0,
        Value::String(s) => s.is_empty(),
        Value::List(l) => l.items.is_empty(),
        Value::Map(m) => m.entries.borrow().is_empty(),
        Value::Object(o) => o.is_zero(),
    }
}

pub(crate) use dates::GoTime as GoTimeRef;
pub(crate) use strings::{go_is_digit as strings_go_is_digit, go_is_letter as strings_go_is_letter};

/// Exported struct fields of a Sprig struct object (`certificate`), for `toYaml`/`toJson`.
pub(crate) fn struct_fields(o: &dyn crate::value::GoObject) -> Option<Vec<(&'static str, String)>> {
    crypto::object_fields(o)
}
