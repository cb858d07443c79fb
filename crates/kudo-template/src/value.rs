//! The runtime value model.
//!
//! Go templates are dynamically typed over Go's static types: `printf "%T"`, Sprig's `typeOf`/`kindOf`,
//! argument conversion and even printing (`[]int` vs `[]interface {}`) depend on the Go type of a value,
//! so a value carries enough type identity to reproduce that. Maps are shared and mutable because Go maps
//! are reference types and Sprig's `set`/`unset` mutate them in place (visible through every alias,
//! including the template's data). Slices are immutable: no Sprig or builtin function writes into one.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

/// Go element type of a slice or map value, used for `%T`, `typeOf` and argument conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `interface {}`
    Interface,
    /// `string`
    String,
    /// `int`
    Int,
    /// `int64`
    Int64,
    /// `float64`
    Float64,
    /// `bool`
    Bool,
    /// `uint8` (only `[]uint8`/`[]byte`)
    Uint8,
}

impl ElemType {
    /// The Go spelling, as `%T` prints it inside `[]…` / `map[string]…`.
    pub fn go_name(self) -> &'static str {
        match self {
            ElemType::Interface => "interface {}",
            ElemType::String => "string",
            ElemType::Int => "int",
            ElemType::Int64 => "int64",
            ElemType::Float64 => "float64",
            ElemType::Bool => "bool",
            ElemType::Uint8 => "uint8",
        }
    }
}

/// A Go slice (immutable once built).
#[derive(Clone, Debug)]
pub struct List {
    /// The slice's Go element type (`[]string` vs `[]interface {}`).
    pub elem: ElemType,
    /// The elements, shared between copies of the value.
    pub items: Rc<Vec<Value>>,
}

/// A Go `map[string]T`, shared and mutable like a Go map. Keys iterate sorted, as Go's template
/// `range` and `fmt` do.
#[derive(Clone, Debug)]
pub struct Map {
    /// The map's Go element type (`map[string]string` vs `map[string]interface {}`).
    pub elem: ElemType,
    /// The entries, sorted by key and shared between aliases of the map.
    pub entries: Rc<RefCell<BTreeMap<String, Value>>>,
}

/// An opaque Go value that is neither a scalar, slice nor map: `time.Time`, `*semver.Version`,
/// Sprig's certificate structs, `*url.URL`-like results. Templates reach into them with field or
/// method access (`.Major`, `.Cert`, `.Year`).
pub trait GoObject: fmt::Debug {
    /// `%T` / `typeOf` spelling, e.g. `*semver.Version`, `time.Time`, `sprig.certificate`.
    fn type_name(&self) -> String;
    /// `kindOf` spelling, e.g. `ptr`, `struct`.
    fn kind(&self) -> &'static str;
    /// What `fmt.Sprint` (`%v`, `{{ . }}`) prints.
    fn go_string(&self) -> String;
    /// Field or niladic method access (`.Name`). `None` when the object has no such field/method;
    /// `Some(Err(msg))` when the method itself fails.
    fn field(&self, name: &str) -> Option<Result<Value, String>>;
    /// Method call with arguments (`.Method arg…`), `None` when there is no such method.
    fn call_method(&self, _name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        None
    }
    /// Number of arguments the method `name` takes, when it takes any (`None` for fields, niladic
    /// methods and unknown names): Go reports `wrong number of args for X: want N got 0` when such a
    /// method is used without them.
    fn method_arity(&self, _name: &str) -> Option<usize> {
        None
    }
    /// Is `name` a struct *field* (as opposed to a method)? Go reports arguments given to a field
    /// as `X has arguments but cannot be invoked as function` but to a niladic method as `wrong
    /// number of args for X: want 0 got N`; objects whose accessors are plain struct fields (Sprig's
    /// certificate `.Cert`/`.Key`) override this.
    fn has_field(&self, _name: &str) -> bool {
        false
    }
    /// Is this object "empty" in Sprig's sense (`empty`, `default`)? Structs never are.
    fn is_zero(&self) -> bool {
        false
    }
    /// Downcasting support for functions that accept specific object types.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A template value.
#[derive(Clone, Debug)]
pub enum Value {
    /// Untyped nil (a nil `interface{}`), e.g. JSON `null` or a missing optional value.
    Nil,
    /// Go `bool`.
    Bool(bool),
    /// Go `int`.
    Int(i64),
    /// Go `int64` (Sprig's `int64`, `toDecimal`, …).
    Int64(i64),
    /// Go `float64` (every JSON/YAML number is one).
    Float(f64),
    /// Go `string`.
    String(Rc<str>),
    /// A Go slice.
    List(List),
    /// A Go `map[string]T`.
    Map(Map),
    /// Any other Go value (`time.Time`, `*semver.Version`, …).
    Object(Rc<dyn GoObject>),
}

impl Value {
    /// A Go `string` value.
    pub fn str(s: impl Into<Rc<str>>) -> Value {
        Value::String(s.into())
    }

    /// A `[]interface {}` from items.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(List {
            elem: ElemType::Interface,
            items: Rc::new(items),
        })
    }

    /// A slice with a specific element type (`[]string`, `[]int`, …).
    pub fn typed_list(elem: ElemType, items: Vec<Value>) -> Value {
        Value::List(List {
            elem,
            items: Rc::new(items),
        })
    }

    /// A fresh `map[string]interface {}`.
    pub fn map(entries: BTreeMap<String, Value>) -> Value {
        Value::Map(Map {
            elem: ElemType::Interface,
            entries: Rc::new(RefCell::new(entries)),
        })
    }

    /// A fresh map with a specific element type (`map[string]string`, …).
    pub fn typed_map(elem: ElemType, entries: BTreeMap<String, Value>) -> Value {
        Value::Map(Map {
            elem,
            entries: Rc::new(RefCell::new(entries)),
        })
    }

    /// Converts decoded JSON the way Go's `encoding/json` decodes into `interface{}`: objects become
    /// `map[string]interface {}`, arrays `[]interface {}`, every number `float64`.
    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
            serde_json::Value::String(s) => Value::str(s.as_str()),
            serde_json::Value::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => {
                Value::map(o.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect())
            }
        }
    }

    /// Go's `%T` spelling of this value's dynamic type (`<nil>` for untyped nil).
    pub fn type_name(&self) -> String {
        match self {
            Value::Nil => "<nil>".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Int64(_) => "int64".into(),
            Value::Float(_) => "float64".into(),
            Value::String(_) => "string".into(),
            Value::List(l) => format!("[]{}", l.elem.go_name()),
            Value::Map(m) => format!("map[string]{}", m.elem.go_name()),
            Value::Object(o) => o.type_name(),
        }
    }

    /// Go's `reflect.Kind` spelling (`kindOf`); untyped nil is `invalid`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Int64(_) => "int64",
            Value::Float(_) => "float64",
            Value::String(_) => "string",
            Value::List(_) => "slice",
            Value::Map(_) => "map",
            Value::Object(o) => o.kind(),
        }
    }

    /// The text of a Go `string`; `None` for every other value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}
