//! Go `text/template` + Sprig, rendering KUDO operator templates byte for byte as KUDO v0.19 did.
//!
//! Why our own engine and not the `gotmpl` crate (evaluated): its values carry no Go type
//! identity (`[]int` vs `[]interface {}` matters for `printf "%T"`, `typeOf` and argument
//! conversion), its maps are immutable (Sprig's `set`/`unset` mutate Go maps in place, visibly through
//! the template's data), and its execution errors carry neither position nor Go's
//! `executing "NAME" at <…>:` wording, which KUDO users see in plan status. Those three are the
//! observable contract, so the engine is written here against the Go oracle
//! (`../shared/go-template-oracle`).
//!
//! Public surface: [`Template::parse`] once per file, [`Template::execute`] per render, with a
//! [`FuncMap`] (normally [`kudo_funcs`]) and a [`FuncEnv`] carrying the seeded randomness.
//! A parsed [`Template`] is `Send + Sync`: parse once per package file and share it.
//!
//! The engine follows Go 1.19 `text/template` (the version of the oracle) with
//! `missingkey=error`, message for message. Deliberate differences, all documented limits:
//! * `template` nesting stops at [`limits::MAX_TEMPLATE_DEPTH`] (Go: 100,000), `range` bodies at
//!   [`limits::MAX_RANGE_ITERATIONS`] per render, output at [`limits::MAX_OUTPUT`] bytes, and
//!   parser nesting (parentheses, `if`/`range`/`with`) at [`parse::MAX_PARSE_DEPTH`] levels;
//! * complex-number constants (`3i`) are rejected at parse time (Go accepts them);
//! * `index` of a string yields an `int` byte value (Go: `uint8`; prints the same);
//! * `\x` escapes in string constants that do not form UTF-8 become the matching Latin-1 code point.
//!
//! The AST ([`parse::Tree`]) is public for the package verifier: a field chain `.Params.X` is
//! [`parse::Arg::Field`] with `idents == ["Params", "X"]`; `$.Params.X` / `$v.X` are
//! [`parse::Arg::Variable`] with `idents == ["$", "Params", "X"]`; `(pipe).X` is
//! [`parse::Arg::Chain`]. Operands sit in [`parse::Command::args`] of the [`parse::Pipe`]s found
//! in [`parse::Node::Action`], the `pipe` of `If`/`Range`/`With` branches and `Template` nodes.

pub mod data;
pub mod func;
pub mod limits;
pub mod value;

pub use func::{FuncEnv, FuncError, FuncMap, Function, ParamType, Signature};
pub use value::{ElemType, GoObject, List, Map, Value};
pub mod sprig;
pub mod yaml;

pub use sprig::kudo_funcs;

mod builtins;
mod exec;
pub mod gofmt;
mod lex;
pub mod parse;

use std::sync::Arc;

/// A template error, displayed exactly as KUDO (and the Go oracle in single mode) prints it, so
/// that plan status messages stay byte-identical.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The text could not be parsed (`error parsing template: template: NAME:LINE: MSG`).
    #[error("error parsing template: template: {name}:{line}: {message}")]
    Parse {
        /// Name of the template (the file) the error is in.
        name: String,
        /// 1-based line of the error.
        line: usize,
        /// Go's parse error message, without the `template: NAME:LINE:` prefix.
        message: String,
    },
    /// Execution failed. `message` is Go's `template: NAME:LINE:COL: executing "T" at <NODE>: MSG`;
    /// `limit` is true when one of the [`limits`] stopped the render (not a Go error).
    #[error("error rendering template: {message}")]
    Exec {
        /// Go's full execution error message.
        message: String,
        /// Whether a render limit, not a Go error, stopped execution.
        limit: bool,
    },
}

/// A parsed template file: its main body plus every `define`/`block` it contains.
///
/// Holds only plain data and an `Arc<FuncMap>`, so it is `Send + Sync` and can be cached and shared.
pub struct Template {
    name: String,
    text: String,
    /// Every tree of the file, in definition order ([`Template::lookup`] finds one by name).
    trees: Vec<parse::Tree>,
    funcs: Arc<FuncMap>,
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Template")
            .field("name", &self.name)
            .field(
                "templates",
                &self.trees.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Template {
    /// Parses `text` as the template `name`. Function names are checked against `funcs` and the
    /// builtins at parse time, as Go does (`function "env" not defined`).
    pub fn parse(name: &str, text: &str, funcs: &Arc<FuncMap>) -> Result<Template, Error> {
        let has = |n: &str| funcs.contains(n);
        match parse::parse(name, text, &has) {
            Ok(p) => Ok(Template {
                name: name.to_string(),
                text: text.to_string(),
                trees: p.trees,
                funcs: funcs.clone(),
            }),
            Err(e) => Err(Error::Parse {
                name: name.to_string(),
                line: e.line,
                message: e.msg,
            }),
        }
    }

    /// Executes the template's own body with `missingkey=error` semantics. Output is buffered:
    /// on error nothing is returned.
    pub fn execute(&self, data: &Value, env: &mut FuncEnv) -> Result<String, Error> {
        exec::execute(self, &self.name, data, env)
    }

    /// Executes one of the templates of this file by name (the main one or a `define`d one).
    pub fn execute_template(&self, name: &str, data: &Value, env: &mut FuncEnv) -> Result<String, Error> {
        exec::execute(self, name, data, env)
    }

    /// The parsed tree of the main template (what `execute` runs).
    pub fn tree(&self) -> &parse::Tree {
        // The main tree is always registered under the file's name by `parse`.
        self.lookup(&self.name).expect("the main tree is always parsed")
    }

    /// Every other template defined in the file (`define`/`block`), in definition order.
    pub fn defined(&self) -> impl Iterator<Item = (&str, &parse::Tree)> {
        self.trees
            .iter()
            .filter(move |t| t.name != self.name)
            .map(|t| (t.name.as_str(), t))
    }

    /// The tree named `name` (the main template or a `define`/`block`).
    pub(crate) fn lookup(&self, name: &str) -> Option<&parse::Tree> {
        self.trees.iter().find(|t| t.name == name)
    }

    /// The template (file) name used in error messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Parses and executes `text` with [`kudo_funcs`] and random seed 0 (tests, one-off renders).
///
/// ```
/// use kudo_template::Value;
///
/// // Template data as KUDO builds it: JSON objects become Go `map[string]interface {}`.
/// let data = Value::from_json(&serde_json::json!({"Name": "db", "Params": {"REPLICAS": "3"}}));
/// let out = kudo_template::render(
///     "statefulset.yaml",
///     "name: {{ .Name | upper }}\nreplicas: {{ .Params.REPLICAS | int | add 1 }}",
///     &data,
/// )?;
/// assert_eq!(out, "name: DB\nreplicas: 4");
///
/// // A missing key is an error with Go's wording, as KUDO users see it in plan status.
/// let err = kudo_template::render("t", "{{ .Params.NOPE }}", &data).unwrap_err();
/// assert!(err.to_string().contains("map has no entry for key \"NOPE\""), "{err}");
/// # Ok::<(), kudo_template::Error>(())
/// ```
pub fn render(name: &str, text: &str, data: &Value) -> Result<String, Error> {
    let t = Template::parse(name, text, &kudo_funcs())?;
    let mut env = FuncEnv::with_seed(0);
    t.execute(data, &mut env)
}

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn template_is_send_sync() {
        assert_send_sync::<super::Template>();
    }
}
