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
    /// The fixed parameters, in order.
    pub params: Vec<ParamType>,
    /// `...T` final parameter, if any.
    pub variadic: Option<ParamType>,
}

impl Signature {
    /// A signature with fixed parameters only.
    pub fn new(params: &[ParamType]) -> Signature {
        Signature {
            params: params.to_vec(),
            variadic: None,
        }
    }
    /// A signature with fixed parameters followed by `...rest`.
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
    /// An error with message `msg`.
    pub fn new(msg: impl Into<String>) -> FuncError {
        FuncError(msg.into())
    }
}

/// Per-render state a function may use. Randomness comes from a caller-supplied seed so that
/// rendering the same plan run twice yields identical objects (KUDO re-rendered on every pass and
/// restarted pods because random values changed).
pub struct FuncEnv {
    /// The seeded generator behind the random functions (`randAlphaNum`, keys, certificates, …).
    pub rng: rand_chacha::ChaCha20Rng,
    /// Upper bound on the number of elements a function may create in one list/string
    /// (`until`, `repeat`, …), so a template cannot exhaust memory.
    pub max_items: usize,
}

impl FuncEnv {
    /// An environment whose random functions are seeded with `seed` (kudo-rs derives it from the
    /// plan execution UID and the template name), with the default item limit.
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
    /// The Go signature the engine checks and converts arguments against.
    pub sig: Signature,
    /// The Rust implementation, called with the converted arguments.
    pub body: Arc<FuncBody>,
}

/// Name → function. Builtins (`and`, `eq`, `index`, …) are handled by the engine and are not in
/// this map, but a name here shadows nothing: Go forbids redefining builtins only by convention.
#[derive(Clone, Default)]
pub struct FuncMap {
    /// The registered functions by the name templates call them with.
    pub funcs: HashMap<String, Function>,
}

impl FuncMap {
    /// An empty map.
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

    /// The function registered as `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Function> {
        self.funcs.get(name)
    }

    /// Whether a function is registered as `name`.
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
