//! Function registry: how Sprig and KUDO functions are declared to the engine.
//!
//! Go's `text/template` checks and converts arguments by reflection against each function's Go
//! signature (`wrong type for value; expected string; got int`, untyped number constants adapting to
//! an `int` or `float64` parameter, …). Each function therefore declares its Go signature here, and
//! the engine does the checking/conversion before calling the Rust body, so bodies receive values of
//! the declared types.

use std::collections::HashMap;
use std::sync::Arc;

use crate::value::Value;

/// The Go type of a function parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// `interface{}`: any value, passed as is.
    Any,
    String,
    Int,
    Int64,
    Float64,
    Bool,
    /// `[]interface{}`
    ListAny,
    /// `[]string`
    StringList,
    /// `map[string]interface{}`
    MapAny,
    /// `time.Time` (Sprig's `dateModify`, `unixEpoch`): Go checks the argument's type before the
    /// call, so a string fails as `wrong type for value; expected time.Time; got string`.
    Time,
}

/// A function's Go signature.
#[derive(Clone, Debug)]
pub struct Signature {
    pub params: Vec<ParamType>,
    /// `...T` final parameter, if any.
    pub variadic: Option<ParamType>,
}

impl Signature {
    pub fn new(params: &[ParamType]) -> Signature {
        Signature {
            params: params.to_vec(),
            variadic: None,
        }
    }
    pub fn variadic(params: &[ParamType], rest: ParamType) -> Signature {
        Signature {
            params: params.to_vec(),
            variadic: Some(rest),
        }
    }
}

/// An error returned by a function body (Go's second `error` result, or a recovered panic). The
/// engine reports it as `error calling NAME: MESSAGE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncError(pub String);

impl FuncError {
    pub fn new(msg: impl Into<String>) -> FuncError {
        FuncError(msg.into())
    }
}

/// Per-render state a function may use. Randomness comes from a caller-supplied seed so that
/// rendering the same plan run twice yields identical objects (KUDO re-rendered on every pass and
/// restarted pods because random values changed).
pub struct FuncEnv {
    pub rng: rand_chacha::ChaCha20Rng,
    /// Upper bound on the number of elements a function may create in one list/string
    /// (`until`, `repeat`, …), so a template cannot exhaust memory.
    pub max_items: usize,
}

impl FuncEnv {
    pub fn with_seed(seed: u64) -> FuncEnv {
        use rand::SeedableRng;
        FuncEnv {
            rng: rand_chacha::ChaCha20Rng::seed_from_u64(seed),
            max_items: crate::limits::MAX_ITEMS,
        }
    }
}

/// The body of a function. Arguments are already converted to the declared parameter types
/// (variadic arguments follow the fixed ones, flattened).
pub type FuncBody = dyn Fn(&mut FuncEnv, &[Value]) -> Result<Value, FuncError> + Send + Sync;

/// A declared function.
#[derive(Clone)]
pub struct Function {
    pub sig: Signature,
    pub body: Arc<FuncBody>,
}

/// Name → function. Builtins (`and`, `eq`, `index`, …) are handled by the engine and are not in
/// this map, but a name here shadows nothing: Go forbids redefining builtins only by convention.
#[derive(Clone, Default)]
pub struct FuncMap {
    pub funcs: HashMap<String, Function>,
}

impl FuncMap {
    pub fn new() -> FuncMap {
        FuncMap::default()
    }

    /// Registers `name` with Go signature `sig`.
    pub fn insert<F>(&mut self, name: &str, sig: Signature, body: F)
    where
        F: Fn(&mut FuncEnv, &[Value]) -> Result<Value, FuncError> + Send + Sync + 'static,
    {
        self.funcs.insert(
            name.to_string(),
            Function {
                sig,
                body: Arc::new(body),
            },
        );
    }

    pub fn get(&self, name: &str) -> Option<&Function> {
        self.funcs.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.funcs.contains_key(name)
    }

    /// Sorted names (for `--list-funcs`-style output and tests).
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.funcs.keys().cloned().collect();
        v.sort();
        v
    }
}
