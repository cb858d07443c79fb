//! Execution of a parsed template with Go `text/template` semantics (`missingkey=error`).
//!
//! Go tracks the *static* type of every value through `reflect`; the one distinction that is
//! observable in templates is whether a value sits in an `interface {}` slot (a map/slice element)
//! or was unwrapped by a pipeline. It decides messages such as `can't evaluate field b in type
//! interface {}` vs `… in type string`, and whether a nil prints `<no value>`. [`Val`] carries that
//! bit next to the [`Value`].
//!
//! The "current node" (Go's `state.at`) is updated at the same points as Go does, because the
//! `at <…>` part and the column of every execution error come from it.

use crate::builtins;
use crate::func::{FuncEnv, FuncError, ParamType};
use crate::limits;
use crate::parse::{Arg, Branch, Command, Node, Number, Pipe, Tree};
use crate::value::{ElemType, Value};
use crate::{Error, Template};

/// A value plus whether it is held in an `interface {}` slot (Go `reflect.Interface` kind).
#[derive(Clone, Debug)]
pub(crate) struct Val {
    pub v: Value,
    pub iface: bool,
}

impl Val {
    pub fn new(v: Value) -> Val {
        Val { v, iface: false }
    }
    /// Go's zero `reflect.Value` (e.g. the result of a pipeline that produced nil).
    pub fn invalid() -> Val {
        Val {
            v: Value::Nil,
            iface: false,
        }
    }
    pub fn is_invalid(&self) -> bool {
        matches!(self.v, Value::Nil) && !self.iface
    }
    /// Go's `%T`-style static type name (`interface {}` for interface slots).
    pub fn static_type(&self) -> String {
        if self.iface {
            "interface {}".into()
        } else {
            self.v.type_name()
        }
    }
    /// Pipeline unwrapping: an `interface {}` value becomes its dynamic value.
    fn unwrap(self) -> Val {
        Val {
            v: self.v,
            iface: false,
        }
    }
}

/// An execution error message (Go's full `template: …` text) or a limit being hit.
pub(crate) struct ExecErr {
    pub msg: String,
    pub limit: bool,
}

type R<T> = Result<T, ExecErr>;

#[derive(Clone, Copy)]
enum Loc<'t> {
    None,
    Node(&'t Node),
    Pipe(&'t Pipe),
    Cmd(&'t Command),
    Arg(&'t Arg),
}

impl Loc<'_> {
    fn pos(&self) -> usize {
        match self {
            Loc::None => 0,
            Loc::Node(n) => n.pos(),
            Loc::Pipe(p) => p.pos,
            Loc::Cmd(c) => c.pos,
            Loc::Arg(a) => a.pos(),
        }
    }
    fn describe(&self) -> String {
        match self {
            Loc::None => String::new(),
            Loc::Node(n) => n.to_string(),
            Loc::Pipe(p) => p.to_string(),
            Loc::Cmd(c) => c.to_string(),
            Loc::Arg(a) => a.to_string(),
        }
    }
}

/// Runs `f` on a fresh stack segment when the current one is nearly exhausted, so that deep (but
/// limit-respecting) template recursion cannot overflow the caller's thread stack.
fn grow<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, f)
}

enum Flow {
    Normal,
    Break,
    Continue,
}

pub(crate) struct State<'t, 'e> {
    t: &'t Template,
    name: &'t str,
    node: Loc<'t>,
    vars: Vec<(&'t str, Val)>,
    out: String,
    depth: usize,
    iterations: usize,
    pub(crate) env: &'e mut FuncEnv,
}

/// Executes template `name` of `t` with `data` as dot.
pub(crate) fn execute(t: &Template, name: &str, data: &Value, env: &mut FuncEnv) -> Result<String, Error> {
    let Some((tname, tree)) = t.lookup(name).map(|tree| (&tree.name, tree)) else {
        return Err(Error::Exec {
            message: format!(
                "template: no template {} associated with template {}",
                crate::gofmt::quote(name),
                crate::gofmt::quote(&t.name)
            ),
            limit: false,
        });
    };
    let dot = Val::new(data.clone());
    let mut s = State {
        t,
        name: tname.as_str(),
        node: Loc::None,
        vars: vec![("$", dot.clone())],
        out: String::with_capacity(t.text.len() + 256),
        depth: 0,
        iterations: 0,
        env,
    };
    match s.walk_list(&dot, &tree.root) {
        Ok(_) => Ok(s.out),
        Err(e) => Err(Error::Exec {
            message: e.msg,
            limit: e.limit,
        }),
    }
}

fn go_type_name(p: ParamType) -> &'static str {
    match p {
        ParamType::Any => "interface {}",
        ParamType::String => "string",
        ParamType::Int => "int",
        ParamType::Int64 => "int64",
        ParamType::Float64 => "float64",
        ParamType::Bool => "bool",
        ParamType::ListAny => "[]interface {}",
        ParamType::StringList => "[]string",
        ParamType::MapAny => "map[string]interface {}",
        ParamType::Time => "time.Time",
    }
}

/// The parameter kinds the engine knows, builtins included (`reflect.Value` parameters take any
/// operand unconverted).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PT {
    Go(ParamType),
    Reflect,
}

fn can_be_nil(p: PT) -> bool {
    matches!(
        p,
        PT::Reflect | PT::Go(ParamType::Any | ParamType::ListAny | ParamType::StringList | ParamType::MapAny)
    )
}

fn assignable(v: &Value, p: ParamType) -> bool {
    match (p, v) {
        (ParamType::Any, _) => true,
        (ParamType::String, Value::String(_)) => true,
        (ParamType::Int, Value::Int(_)) => true,
        (ParamType::Int64, Value::Int64(_)) => true,
        (ParamType::Float64, Value::Float(_)) => true,
        (ParamType::Bool, Value::Bool(_)) => true,
        (ParamType::ListAny, Value::List(l)) => l.elem == ElemType::Interface,
        (ParamType::StringList, Value::List(l)) => l.elem == ElemType::String,
        (ParamType::MapAny, Value::Map(m)) => m.elem == ElemType::Interface,
        (ParamType::Time, Value::Object(o)) => o.type_name() == "time.Time",
        _ => false,
    }
}

/// The zero value a nil converts to for a nilable parameter type.
fn nil_for(p: ParamType) -> Value {
    match p {
        ParamType::ListAny => Value::list(Vec::new()),
        ParamType::StringList => Value::typed_list(ElemType::String, Vec::new()),
        ParamType::MapAny => Value::map(Default::default()),
        _ => Value::Nil,
    }
}

/// How a builtin is declared: fixed parameter count and whether it is variadic.
fn builtin_arity(name: &str) -> Option<(usize, bool)> {
    Some(match name {
        "and" | "or" | "eq" | "index" | "slice" | "call" => (1, true),
        "not" | "len" => (1, false),
        "ne" | "lt" | "le" | "gt" | "ge" => (2, false),
        "print" | "println" | "html" | "js" | "urlquery" => (0, true),
        "printf" => (1, true),
        _ => return None,
    })
}

fn builtin_param(name: &str, i: usize) -> PT {
    match name {
        "print" | "println" | "html" | "js" | "urlquery" => PT::Go(ParamType::Any),
        "printf" => {
            if i == 0 {
                PT::Go(ParamType::String)
            } else {
                PT::Go(ParamType::Any)
            }
        }
        _ => PT::Reflect,
    }
}

/// Where a function comes from: the function map shadows builtins, as in Go.
enum Callee<'f> {
    Func(&'f crate::func::Function),
    Builtin,
}

impl<'t> State<'t, '_> {
    fn at(&mut self, l: Loc<'t>) {
        self.node = l;
    }

    fn errorf(&self, msg: impl std::fmt::Display) -> ExecErr {
        ExecErr {
            msg: self.format_error(&msg.to_string()),
            limit: false,
        }
    }

    fn limit_err(&self, msg: String) -> ExecErr {
        ExecErr {
            msg: self.format_error(&msg),
            limit: true,
        }
    }

    fn format_error(&self, msg: &str) -> String {
        if let Loc::None = self.node {
            return format!("template: {}: {}", self.name, msg);
        }
        let pos = self.node.pos().min(self.t.text.len());
        let text = &self.t.text[..pos];
        let (line, col) = match text.rfind('\n') {
            None => (1, pos),
            Some(i) => (1 + text.matches('\n').count(), pos - (i + 1)),
        };
        format!(
            "template: {}:{}:{}: executing {} at <{}>: {}",
            self.t.name,
            line,
            col,
            crate::gofmt::quote(self.name),
            self.node.describe(),
            msg
        )
    }

    fn write(&mut self, s: &str) -> R<()> {
        if self.out.len() + s.len() > limits::MAX_OUTPUT {
            return Err(self.limit_err(format!(
                "rendered output exceeds the limit of {} bytes (limits::MAX_OUTPUT)",
                limits::MAX_OUTPUT
            )));
        }
        self.out.push_str(s);
        Ok(())
    }

    // ---- walking ----

    fn walk_list(&mut self, dot: &Val, list: &'t [Node]) -> R<Flow> {
        for n in list {
            match self.walk(dot, n)? {
                Flow::Normal => {}
                f => return Ok(f),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, dot: &Val, node: &'t Node) -> R<Flow> {
        self.at(Loc::Node(node));
        match node {
            Node::Text { text, .. } => self.write(text)?,
            Node::Action { pipe, .. } => {
                let val = self.eval_pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    self.at(Loc::Node(node));
                    self.print_value(&val)?;
                }
            }
            Node::Break { .. } => return Ok(Flow::Break),
            Node::Continue { .. } => return Ok(Flow::Continue),
            Node::If(b) => return grow(|| self.walk_if_or_with(false, dot, b)),
            Node::With(b) => return grow(|| self.walk_if_or_with(true, dot, b)),
            Node::Range(b) => return grow(|| self.walk_range(dot, node, b)),
            Node::Template { name, pipe, .. } => grow(|| self.walk_template(dot, node, name, pipe.as_ref()))?,
        }
        Ok(Flow::Normal)
    }

    fn print_value(&mut self, val: &Val) -> R<()> {
        match &val.v {
            Value::Nil if !val.iface => self.write("<no value>"),
            Value::String(s) => {
                let s = s.clone();
                self.write(&s)
            }
            v => {
                let mut tmp = String::new();
                crate::gofmt::write_value(&mut tmp, v);
                self.write(&tmp)
            }
        }
    }

    fn walk_if_or_with(&mut self, is_with: bool, dot: &Val, b: &'t Branch) -> R<Flow> {
        let mark = self.vars.len();
        let r = (|| {
            let val = self.eval_pipeline(dot, &b.pipe)?;
            if builtins::truth(&val.v) {
                if is_with {
                    self.walk_list(&val, &b.list)
                } else {
                    self.walk_list(dot, &b.list)
                }
            } else if let Some(e) = &b.else_list {
                self.walk_list(dot, e)
            } else {
                Ok(Flow::Normal)
            }
        })();
        self.vars.truncate(mark);
        r
    }

    fn walk_range(&mut self, dot: &Val, node: &'t Node, b: &'t Branch) -> R<Flow> {
        self.at(Loc::Node(node));
        let mark = self.vars.len();
        let r = self.walk_range_inner(dot, node, b);
        self.vars.truncate(mark);
        match r {
            Ok(Flow::Break) | Ok(Flow::Continue) => Ok(Flow::Normal),
            other => other,
        }
    }

    fn walk_range_inner(&mut self, dot: &Val, node: &'t Node, b: &'t Branch) -> R<Flow> {
        let val = self.eval_pipeline(dot, &b.pipe)?;
        let mark = self.vars.len();
        let ndecl = b.pipe.decl.len();
        match &val.v {
            Value::List(l) if !l.items.is_empty() => {
                let iface = l.elem == ElemType::Interface;
                let items = l.items.clone();
                for (i, elem) in items.iter().enumerate() {
                    let elem = Val {
                        v: elem.clone(),
                        iface,
                    };
                    self.count_iteration(node)?;
                    if self.one_iteration(Val::new(Value::Int(i as i64)), elem, ndecl, mark, b)? {
                        break;
                    }
                }
                return Ok(Flow::Normal);
            }
            Value::Map(m) if !m.entries.borrow().is_empty() => {
                let iface = m.elem == ElemType::Interface;
                let entries: Vec<(String, Value)> = m
                    .entries
                    .borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                for (k, v) in entries {
                    self.count_iteration(node)?;
                    if self.one_iteration(Val::new(Value::str(k)), Val { v, iface }, ndecl, mark, b)? {
                        break;
                    }
                }
                return Ok(Flow::Normal);
            }
            Value::List(_) | Value::Map(_) | Value::Nil => {}
            v => {
                let shown = crate::gofmt::sprint(v);
                return Err(self.errorf(format!("range can't iterate over {shown}")));
            }
        }
        if let Some(e) = &b.else_list {
            return self.walk_list(dot, e);
        }
        Ok(Flow::Normal)
    }

    fn count_iteration(&mut self, node: &'t Node) -> R<()> {
        self.iterations += 1;
        if self.iterations > limits::MAX_RANGE_ITERATIONS {
            self.at(Loc::Node(node));
            return Err(self.limit_err(format!(
                "range iterations exceed the limit of {} per render (limits::MAX_RANGE_ITERATIONS)",
                limits::MAX_RANGE_ITERATIONS
            )));
        }
        Ok(())
    }

    /// Runs one range iteration; returns true on `break`.
    fn one_iteration(&mut self, index: Val, elem: Val, ndecl: usize, mark: usize, b: &'t Branch) -> R<bool> {
        if ndecl > 0 {
            self.set_top_var(1, elem.clone());
        }
        if ndecl > 1 {
            self.set_top_var(2, index);
        }
        let r = self.walk_list(&elem, &b.list);
        self.vars.truncate(mark);
        match r? {
            Flow::Break => Ok(true),
            _ => Ok(false),
        }
    }

    fn set_top_var(&mut self, n: usize, v: Val) {
        let len = self.vars.len();
        if n <= len {
            self.vars[len - n].1 = v;
        }
    }

    fn walk_template(&mut self, dot: &Val, node: &'t Node, name: &str, pipe: Option<&'t Pipe>) -> R<()> {
        self.at(Loc::Node(node));
        let Some((tname, tree)) = self.t.lookup(name).map(|tree| (&tree.name, tree)) else {
            return Err(self.errorf(format!("template {} not defined", crate::gofmt::quote(name))));
        };
        if self.depth >= limits::MAX_TEMPLATE_DEPTH {
            return Err(self.limit_err(format!(
                "exceeded maximum template depth ({}) (limits::MAX_TEMPLATE_DEPTH)",
                limits::MAX_TEMPLATE_DEPTH
            )));
        }
        let newdot = match pipe {
            Some(p) => self.eval_pipeline(dot, p)?,
            None => Val::invalid(),
        };
        let saved_vars = std::mem::replace(&mut self.vars, vec![("$", newdot.clone())]);
        let saved_name = std::mem::replace(&mut self.name, tname.as_str());
        self.depth += 1;
        let r = self.walk_tree(&newdot, tree);
        self.depth -= 1;
        self.name = saved_name;
        self.vars = saved_vars;
        r.map(|_| ())
    }

    fn walk_tree(&mut self, dot: &Val, tree: &'t Tree) -> R<Flow> {
        self.walk_list(dot, &tree.root)
    }

    // ---- pipelines and commands ----

    fn eval_pipeline(&mut self, dot: &Val, pipe: &'t Pipe) -> R<Val> {
        self.at(Loc::Pipe(pipe));
        let mut value: Option<Val> = None;
        for cmd in &pipe.cmds {
            let v = self.eval_command(dot, cmd, value.take())?;
            value = Some(v.unwrap());
        }
        let value = value.unwrap_or_else(Val::invalid);
        for (_, name) in &pipe.decl {
            if pipe.is_assign {
                self.set_var(name, value.clone())?;
            } else {
                self.vars.push((name.as_str(), value.clone()));
            }
        }
        Ok(value)
    }

    fn set_var(&mut self, name: &str, v: Val) -> R<()> {
        for (n, slot) in self.vars.iter_mut().rev() {
            if *n == name {
                *slot = v;
                return Ok(());
            }
        }
        Err(self.errorf(format!("undefined variable: {name}")))
    }

    fn var_value(&self, name: &str) -> R<Val> {
        for (n, v) in self.vars.iter().rev() {
            if *n == name {
                return Ok(v.clone());
            }
        }
        Err(self.errorf(format!("undefined variable: {name}")))
    }

    fn not_a_function(&self, args: &[Arg], final_: &Option<Val>) -> R<()> {
        if args.len() > 1 || final_.is_some() {
            return Err(self.errorf(format!("can't give argument to non-function {}", args[0])));
        }
        Ok(())
    }

    fn eval_command(&mut self, dot: &Val, cmd: &'t Command, final_: Option<Val>) -> R<Val> {
        let first = &cmd.args[0];
        match first {
            Arg::Field { idents, .. } => {
                self.at(Loc::Arg(first));
                return self.eval_field_chain(dot, dot.clone(), first, idents, &cmd.args, final_);
            }
            Arg::Chain { .. } => return self.eval_chain(dot, first, &cmd.args, final_),
            Arg::Identifier { name, .. } => {
                self.at(Loc::Arg(first));
                return self.eval_function(dot, name, Loc::Cmd(cmd), &cmd.args, final_);
            }
            Arg::Pipe(p) => {
                self.not_a_function(&cmd.args, &final_)?;
                return grow(|| self.eval_pipeline(dot, p));
            }
            Arg::Variable { .. } => return self.eval_variable(dot, first, &cmd.args, final_),
            _ => {}
        }
        self.at(Loc::Arg(first));
        self.not_a_function(&cmd.args, &final_)?;
        match first {
            Arg::Bool { val, .. } => Ok(Val::new(Value::Bool(*val))),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Nil { .. } => Err(self.errorf("nil is not a command")),
            Arg::Number { num, .. } => self.ideal_constant(first, num),
            Arg::String { text, .. } => Ok(Val::new(Value::str(text.as_str()))),
            _ => Err(self.errorf(format!(
                "can't evaluate command {}",
                crate::gofmt::quote(&first.to_string())
            ))),
        }
    }

    fn ideal_constant(&mut self, node: &'t Arg, n: &Number) -> R<Val> {
        self.at(Loc::Arg(node));
        let t = &n.text;
        let is_hex_int = t.len() > 2
            && t.as_bytes()[0] == b'0'
            && matches!(t.as_bytes()[1], b'x' | b'X')
            && !t.contains(['p', 'P']);
        let is_rune = t.starts_with('\'');
        if n.is_float && !is_hex_int && !is_rune && t.contains(['.', 'e', 'E', 'p', 'P']) {
            return Ok(Val::new(Value::Float(n.float64)));
        }
        if n.is_int {
            return Ok(Val::new(Value::Int(n.int64)));
        }
        if n.is_uint {
            return Err(self.errorf(format!("{t} overflows int")));
        }
        Ok(Val::invalid())
    }

    fn eval_chain(&mut self, dot: &Val, chain: &'t Arg, args: &'t [Arg], final_: Option<Val>) -> R<Val> {
        self.at(Loc::Arg(chain));
        let Arg::Chain { node, fields, .. } = chain else {
            return Err(self.errorf("internal error: not a chain"));
        };
        if let Arg::Nil { .. } = node.as_ref() {
            return Err(self.errorf(format!("indirection through explicit nil in {chain}")));
        }
        let mut recv = self.eval_arg_untyped(dot, node)?;
        if matches!(node.as_ref(), Arg::Identifier { .. }) && recv.is_invalid() {
            // A function's nil result is still an `interface {}` (only a pipeline unwraps it), so
            // Go says `nil pointer evaluating interface {}.X`, not `nil data`.
            recv.iface = true;
        }
        self.eval_field_chain(dot, recv, chain, fields, args, final_)
    }

    fn eval_variable(&mut self, dot: &Val, var: &'t Arg, args: &'t [Arg], final_: Option<Val>) -> R<Val> {
        self.at(Loc::Arg(var));
        let Arg::Variable { idents, .. } = var else {
            return Err(self.errorf("internal error: not a variable"));
        };
        let value = self.var_value(&idents[0])?;
        if idents.len() == 1 {
            self.not_a_function(args, &final_)?;
            return Ok(value);
        }
        self.eval_field_chain(dot, value, var, &idents[1..], args, final_)
    }

    fn eval_field_chain(
        &mut self,
        dot: &Val,
        mut recv: Val,
        node: &'t Arg,
        idents: &'t [crate::parse::Ident],
        args: &'t [Arg],
        final_: Option<Val>,
    ) -> R<Val> {
        let n = idents.len();
        for id in &idents[..n - 1] {
            recv = self.eval_field(dot, id, node, &[], None, recv)?;
        }
        self.eval_field(dot, &idents[n - 1], node, args, final_, recv)
    }

    fn eval_field(
        &mut self,
        dot: &Val,
        field: &str,
        node: &'t Arg,
        args: &'t [Arg],
        final_: Option<Val>,
        recv: Val,
    ) -> R<Val> {
        if recv.is_invalid() {
            return Err(self.errorf(format!(
                "nil data; no entry for key {}",
                crate::gofmt::quote(field)
            )));
        }
        let typ = || recv.static_type();
        let has_args = args.len() > 1 || final_.is_some();
        match &recv.v {
            Value::Nil => Err(self.errorf(format!("nil pointer evaluating {}.{field}", typ()))),
            Value::Map(m) => {
                if has_args {
                    return Err(self.errorf(format!("{field} is not a method but has arguments")));
                }
                let r = m.entries.borrow().get(field).cloned();
                match r {
                    Some(v) => Ok(Val {
                        v,
                        iface: m.elem == ElemType::Interface,
                    }),
                    None => {
                        Err(self.errorf(format!("map has no entry for key {}", crate::gofmt::quote(field))))
                    }
                }
            }
            Value::Object(o) => {
                let o = o.clone();
                if has_args && o.field(field).is_some() {
                    if o.has_field(field) {
                        return Err(
                            self.errorf(format!("{field} has arguments but cannot be invoked as function"))
                        );
                    }
                    let got = args.len().saturating_sub(1) + usize::from(final_.is_some());
                    return Err(self.errorf(format!("wrong number of args for {field}: want 0 got {got}")));
                }
                // Go looks the method up before evaluating its arguments: an unknown method fails
                // at the receiver, whatever the arguments would do.
                if has_args && o.method_arity(field).is_none() && o.call_method(field, &[]).is_none() {
                    return Err(self.errorf(format!("can't evaluate field {field} in type {}", typ())));
                }
                // The argument count is checked before the arguments are evaluated, too.
                if let Some(want) = o.method_arity(field) {
                    let got = args.len().saturating_sub(1) + usize::from(final_.is_some());
                    if has_args && got != want {
                        return Err(
                            self.errorf(format!("wrong number of args for {field}: want {want} got {got}"))
                        );
                    }
                }
                if has_args {
                    let mut argv = Vec::new();
                    for a in args.iter().skip(1) {
                        argv.push(self.eval_arg(dot, PT::Go(ParamType::Any), a)?.v);
                    }
                    if let Some(f) = final_ {
                        argv.push(f.v);
                    }
                    match o.call_method(field, &argv) {
                        Some(Ok(v)) => return Ok(Val::new(v)),
                        Some(Err(e)) => {
                            self.at(Loc::Arg(node));
                            return Err(self.errorf(format!("error calling {field}: {e}")));
                        }
                        None => {}
                    }
                } else {
                    match o.field(field) {
                        Some(Ok(v)) => return Ok(Val::new(v)),
                        Some(Err(e)) => {
                            self.at(Loc::Arg(node));
                            return Err(self.errorf(format!("error calling {field}: {e}")));
                        }
                        None => {}
                    }
                    if let Some(want) = o.method_arity(field) {
                        return Err(
                            self.errorf(format!("wrong number of args for {field}: want {want} got 0"))
                        );
                    }
                }
                Err(self.errorf(format!("can't evaluate field {field} in type {}", typ())))
            }
            _ => Err(self.errorf(format!("can't evaluate field {field} in type {}", typ()))),
        }
    }

    fn eval_function(
        &mut self,
        dot: &Val,
        name: &'t str,
        cmd: Loc<'t>,
        args: &'t [Arg],
        final_: Option<Val>,
    ) -> R<Val> {
        let t: &'t Template = self.t;
        let callee = match t.funcs.get(name) {
            Some(f) => Callee::Func(f),
            None if builtin_arity(name).is_some() => Callee::Builtin,
            None => {
                return Err(self.errorf(format!("{} is not a defined function", crate::gofmt::quote(name))));
            }
        };
        let args = if args.is_empty() { args } else { &args[1..] };
        let num_in = args.len() + usize::from(final_.is_some());
        let (nparams, variadic) = match &callee {
            Callee::Func(f) => (
                f.sig.params.len() + usize::from(f.sig.variadic.is_some()),
                f.sig.variadic.is_some(),
            ),
            Callee::Builtin => {
                let (fixed, v) = builtin_arity(name).unwrap_or((0, false));
                (fixed + usize::from(v), v)
            }
        };
        let num_fixed = if variadic { nparams - 1 } else { args.len() };
        if variadic {
            if num_in < num_fixed {
                return Err(self.errorf(format!(
                    "wrong number of args for {name}: want at least {} got {}",
                    nparams - 1,
                    args.len()
                )));
            }
        } else if num_in != nparams {
            return Err(self.errorf(format!(
                "wrong number of args for {name}: want {nparams} got {num_in}"
            )));
        }
        let param = |i: usize| -> PT {
            match &callee {
                Callee::Func(f) => {
                    if i < f.sig.params.len() {
                        PT::Go(f.sig.params[i])
                    } else {
                        PT::Go(f.sig.variadic.unwrap_or(ParamType::Any))
                    }
                }
                Callee::Builtin => builtin_param(name, i),
            }
        };

        if matches!(callee, Callee::Builtin) && (name == "and" || name == "or") {
            let mut v = Val::invalid();
            for a in args {
                v = self.eval_arg(dot, PT::Reflect, a)?;
                if builtins::truth(&v.v) == (name == "or") {
                    return Ok(v);
                }
            }
            if let Some(f) = final_ {
                v = f;
            }
            return Ok(v);
        }

        let mut argv: Vec<Val> = Vec::with_capacity(num_in);
        for (i, a) in args.iter().enumerate() {
            let p = param(i);
            argv.push(self.eval_arg(dot, p, a)?);
        }
        if let Some(f) = final_ {
            let p = param(num_in - 1);
            let v = self.validate_type(f, p)?;
            argv.push(v);
        }
        let result = match callee {
            Callee::Func(f) => {
                let vals: Vec<Value> = argv.into_iter().map(|v| v.v).collect();
                (f.body)(self.env, &vals).map(Val::new)
            }
            Callee::Builtin => builtins::call_builtin(self, name, argv),
        };
        match result {
            Ok(v) => {
                // Values are built before anything is written, so a template that doubles a
                // string or list in a loop would exhaust memory long before the output limit.
                let too_big = match &v.v {
                    Value::String(s) => s.len() > limits::MAX_OUTPUT,
                    Value::List(l) => l.items.len() > self.env.max_items,
                    _ => false,
                };
                if too_big {
                    self.at(cmd);
                    return Err(self.limit_err(format!(
                        "error calling {name}: result exceeds the size limit ({} bytes per string, \
                         limits::MAX_OUTPUT; {} items per list, FuncEnv::max_items)",
                        limits::MAX_OUTPUT,
                        self.env.max_items
                    )));
                }
                Ok(v)
            }
            Err(FuncError(msg)) => {
                self.at(cmd);
                Err(self.errorf(format!("error calling {name}: {msg}")))
            }
        }
    }

    /// Go's `evalArg` with a nil type (chain receivers): any operand, nil allowed.
    fn eval_arg_untyped(&mut self, dot: &Val, n: &'t Arg) -> R<Val> {
        self.eval_arg(dot, PT::Reflect, n)
            .map(|v| if matches!(n, Arg::Pipe(_)) { v.unwrap() } else { v })
    }

    fn eval_arg(&mut self, dot: &Val, typ: PT, n: &'t Arg) -> R<Val> {
        self.at(Loc::Arg(n));
        match n {
            Arg::Dot { .. } => return self.validate_type(dot.clone(), typ),
            Arg::Nil { .. } => {
                if can_be_nil(typ) {
                    return Ok(match typ {
                        PT::Go(p) => Val::new(nil_for(p)),
                        PT::Reflect => Val::invalid(),
                    });
                }
                let PT::Go(p) = typ else { return Ok(Val::invalid()) };
                return Err(self.errorf(format!("cannot assign nil to {}", go_type_name(p))));
            }
            Arg::Field { idents, .. } => {
                let v = self.eval_field_chain(dot, dot.clone(), n, idents, std::slice::from_ref(n), None)?;
                return self.validate_type(v, typ);
            }
            Arg::Variable { .. } => {
                let v = self.eval_variable(dot, n, &[], None)?;
                return self.validate_type(v, typ);
            }
            Arg::Pipe(p) => {
                let v = grow(|| self.eval_pipeline(dot, p))?;
                return self.validate_type(v, typ);
            }
            Arg::Identifier { name, .. } => {
                let v = self.eval_function(dot, name, Loc::Arg(n), &[], None)?;
                return self.validate_type(v, typ);
            }
            Arg::Chain { .. } => {
                let v = self.eval_chain(dot, n, &[], None)?;
                return self.validate_type(v, typ);
            }
            _ => {}
        }
        let p = match typ {
            PT::Reflect | PT::Go(ParamType::Any) => return self.eval_empty_interface(dot, n),
            PT::Go(p) => p,
        };
        match (p, n) {
            (ParamType::Bool, Arg::Bool { val, .. }) => Ok(Val::new(Value::Bool(*val))),
            (ParamType::Bool, _) => Err(self.errorf(format!("expected bool; found {n}"))),
            (ParamType::String, Arg::String { text, .. }) => Ok(Val::new(Value::str(text.as_str()))),
            (ParamType::String, _) => Err(self.errorf(format!("expected string; found {n}"))),
            (ParamType::Int, Arg::Number { num, .. }) if num.is_int => Ok(Val::new(Value::Int(num.int64))),
            (ParamType::Int64, Arg::Number { num, .. }) if num.is_int => {
                Ok(Val::new(Value::Int64(num.int64)))
            }
            (ParamType::Int | ParamType::Int64, _) => {
                Err(self.errorf(format!("expected integer; found {n}")))
            }
            (ParamType::Float64, Arg::Number { num, .. }) if num.is_float => {
                Ok(Val::new(Value::Float(num.float64)))
            }
            (ParamType::Float64, _) => Err(self.errorf(format!("expected float; found {n}"))),
            _ => Err(self.errorf(format!("can't handle {n} for arg of type {}", go_type_name(p)))),
        }
    }

    fn eval_empty_interface(&mut self, dot: &Val, n: &'t Arg) -> R<Val> {
        self.at(Loc::Arg(n));
        match n {
            Arg::Bool { val, .. } => Ok(Val::new(Value::Bool(*val))),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Number { num, .. } => self.ideal_constant(n, num),
            Arg::String { text, .. } => Ok(Val::new(Value::str(text.as_str()))),
            _ => Err(self.errorf(format!(
                "can't handle assignment of {n} to empty interface argument"
            ))),
        }
    }

    fn validate_type(&self, v: Val, typ: PT) -> R<Val> {
        let p = match typ {
            PT::Reflect => return Ok(v),
            PT::Go(p) => p,
        };
        if v.is_invalid() {
            if can_be_nil(typ) {
                return Ok(Val::new(nil_for(p)));
            }
            return Err(self.errorf(format!("invalid value; expected {}", go_type_name(p))));
        }
        if p == ParamType::Any {
            return Ok(v);
        }
        if v.iface && matches!(v.v, Value::Nil) {
            return Err(self.errorf(format!(
                "wrong type for value; expected {}; got interface {{}}",
                go_type_name(p)
            )));
        }
        if assignable(&v.v, p) {
            return Ok(Val::new(v.v));
        }
        Err(self.errorf(format!(
            "wrong type for value; expected {}; got {}",
            go_type_name(p),
            v.v.type_name()
        )))
    }
}
