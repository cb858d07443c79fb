//! `x-kubernetes-validations`: CEL rules over `self` (and `oldSelf` in transition rules).
//!
//! kube-apiserver evaluates a node's rules before its children's, with `self` bound to the node's
//! value. A transition rule (one that mentions `oldSelf`) is evaluated only on an update, and only
//! where the old value can be correlated with the new one: the same property of an object, the
//! same key of a map, the item with the same keys of a `x-kubernetes-list-type: map` list. Items
//! of other lists have no old value, so their transition rules never run.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, LazyLock};

use cel_interpreter::{Context, Program, Value as Cel};
use regex::Regex;
use serde_json::Value;

use crate::walk::{Here, declared_type};
use crate::{Rule, Violation};

/// A compiled rule, and whether it is a transition rule.
pub(crate) struct Compiled {
    pub program: Program,
    pub transition: bool,
}

/// Rules kept compiled per thread.
const CACHE_MAX: usize = 1024;

thread_local! {
    /// Compiled rules by source: a CRD's rules are evaluated for every object written, and the
    /// parse is most of the cost of a small rule.
    static CACHE: RefCell<HashMap<String, Rc<Compiled>>> = RefCell::new(HashMap::new());
}

/// Compiles `rule`, or says why it does not compile. The parser is third-party code fed user
/// input, so a panic in it is a refusal, not a crash.
pub(crate) fn compile(rule: &str) -> Result<Rc<Compiled>, String> {
    if let Some(c) = CACHE.with(|c| c.borrow().get(rule).cloned()) {
        return Ok(c);
    }
    let program = match std::panic::catch_unwind(|| Program::compile(rule)) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(e.to_string().trim().replace('\n', " ")),
        Err(_) => return Err("the CEL parser failed on this rule".to_string()),
    };
    let transition = program.references().has_variable("oldSelf");
    let compiled = Rc::new(Compiled { program, transition });
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        // Bounded: rules come from whatever CRDs are written; a full cache starts over.
        if c.len() >= CACHE_MAX {
            c.clear();
        }
        c.insert(rule.to_string(), Rc::clone(&compiled))
    });
    Ok(compiled)
}

/// The rules pass: every node's rules, then its children's.
pub(crate) fn walk(schema: &Value, v: &Value, old: Option<&Value>, here: &Here, out: &mut Vec<Violation>) {
    if !schema.is_object() || v.is_null() {
        return;
    }
    if let Some(rules) = schema.get("x-kubernetes-validations").and_then(Value::as_array) {
        for r in rules {
            if let Some(violation) = evaluate(schema, r, v, old, here) {
                out.push(violation);
            }
        }
    }
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                let old_child = old.and_then(|o| o.get(k));
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    walk(ps, child, old_child, &here.prop(k), out);
                } else if let Some(a) = additional {
                    walk(a, child, old_child, &here.key(k), out);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            for (i, it) in items.iter().enumerate() {
                let old_item = old.and_then(|o| correlate(schema, it, o));
                walk(item_schema, it, old_item, &here.index(i), out);
            }
        }
        _ => {}
    }
}

/// The old item of a `x-kubernetes-list-type: map` list with the same `x-kubernetes-list-map-keys`.
fn correlate<'a>(schema: &Value, item: &Value, old: &'a Value) -> Option<&'a Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    old.as_array()?
        .iter()
        .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
}

/// One rule on one value; the violation when it does not hold.
fn evaluate(schema: &Value, r: &Value, v: &Value, old: Option<&Value>, here: &Here) -> Option<Violation> {
    let rule = r.get("rule").and_then(Value::as_str)?;
    let message = r
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .map(str::to_string);
    let violation = |message: Option<String>| Violation {
        path: here.cel.clone(),
        value: v.clone(),
        rule: Rule::Cel {
            rule: rule.to_string(),
            message,
        },
        schema_type: declared_type(schema).to_string(),
    };
    // kube names a rule that failed to evaluate by its message when it has one.
    let named = message.clone().unwrap_or_else(|| rule.to_string());
    let compiled = match compile(rule) {
        Ok(c) => c,
        Err(e) => return Some(violation(Some(format!("compilation failed: {e}")))),
    };
    if compiled.transition && old.is_none() {
        return None;
    }
    let mut ctx = Context::default();
    ctx.add_variable_from_value("self", to_cel(v));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    match compiled.program.execute(&ctx) {
        Ok(Cel::Bool(true)) => None,
        Ok(Cel::Bool(false)) => Some(violation(message)),
        Ok(other) => {
            let why = missing_key(rule, v, old)
                .unwrap_or_else(|| format!("rule did not evaluate to a bool: {other:?}"));
            Some(violation(Some(format!("{why} evaluating rule: {named}"))))
        }
        Err(e) => {
            let why = missing_key(rule, v, old).unwrap_or_else(|| e.to_string());
            Some(violation(Some(format!("{why} evaluating rule: {named}"))))
        }
    }
}

static FIELD_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(has\(\s*)?\b(self|oldSelf)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
        .expect("the field path regex compiles")
});

/// Why a rule failed when it read a field the value does not have: `no such key: x`, as kube's CEL
/// says. The interpreter used here does not fail on a missing field (it yields a method value and
/// fails later, in other words), so the rule's `self.a.b` paths are looked up in the value; one
/// inside `has(...)` is a test, not a read.
fn missing_key(rule: &str, v: &Value, old: Option<&Value>) -> Option<String> {
    for c in FIELD_PATH.captures_iter(rule) {
        if c.get(1).is_some() {
            continue;
        }
        let mut cur = if &c[2] == "self" { v } else { old? };
        for seg in c[3].split('.').skip(1) {
            match cur {
                Value::Object(m) => match m.get(seg) {
                    Some(next) => cur = next,
                    None => return Some(format!("no such key: {seg}")),
                },
                _ => break,
            }
        }
    }
    None
}

/// A JSON value as CEL sees it in kube-apiserver: integers are `int` (never `uint`), other
/// numbers `double`.
pub(crate) fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, Cel> = m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cel::from(map)
        }
    }
}
