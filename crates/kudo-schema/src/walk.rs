//! The keyword walk: structural rules first, over the whole value, then the CEL rules.
//!
//! Two passes because kube-apiserver works that way: its OpenAPI validator reports every
//! structural violation, and only when none of them is "blocking" (a wrong type, a missing
//! required field, a bad format, a string or list over its maximum) does it evaluate
//! `x-kubernetes-validations` — a rule over a value of the wrong shape would only produce noise.

use serde_json::{Map, Value};

use crate::{Formats, Rule, Violation, cel, format};

/// Where the walk is, in the two spellings kube-apiserver uses: its OpenAPI validator writes map
/// keys as `.key`, its CEL validator (a `field.Path`) as `[key]`. List indexes are `[i]` in both.
#[derive(Clone, Debug)]
pub(crate) struct Here {
    /// The spelling of structural violations.
    pub schema: String,
    /// The spelling of CEL violations.
    pub cel: String,
}

impl Here {
    fn root(prefix: &str) -> Here {
        Here {
            schema: prefix.to_string(),
            cel: prefix.to_string(),
        }
    }

    /// A declared property.
    pub(crate) fn prop(&self, k: &str) -> Here {
        Here {
            schema: join(&self.schema, k),
            cel: join(&self.cel, k),
        }
    }

    /// A key of a map (`additionalProperties`).
    pub(crate) fn key(&self, k: &str) -> Here {
        Here {
            schema: join(&self.schema, k),
            cel: format!("{}[{k}]", self.cel),
        }
    }

    pub(crate) fn index(&self, i: usize) -> Here {
        Here {
            schema: format!("{}[{i}]", self.schema),
            cel: format!("{}[{i}]", self.cel),
        }
    }
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// See [`crate::validate`].
pub(crate) fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    formats: Formats,
) -> Vec<Violation> {
    let here = Here::root(path);
    let mut walk = Structural {
        formats,
        out: Vec::new(),
    };
    walk.node(schema, value, &here);
    let mut out = walk.out;
    if out.iter().any(blocks_rules) {
        if has_rules(schema) {
            out.push(Violation {
                path: String::new(),
                value: Value::Null,
                rule: Rule::NotChecked,
                schema_type: String::new(),
            });
        }
    } else {
        cel::walk(schema, value, old, &here, &mut out);
    }
    out
}

/// The violations after which kube-apiserver does not evaluate CEL rules (its `hasBlockingErr`:
/// the field error types Required, TooLong, TooMany and TypeInvalid, which is also the type of a
/// `format` violation; an unsupported enum value does not block).
fn blocks_rules(v: &Violation) -> bool {
    matches!(
        v.rule,
        Rule::Type { .. }
            | Rule::Required
            | Rule::MaxLength(_)
            | Rule::MaxItems(_)
            | Rule::MaxProperties(_)
            | Rule::Format(_)
    )
}

/// Whether any node of the schema carries `x-kubernetes-validations`.
pub(crate) fn has_rules(schema: &Value) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    if m.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
    {
        return true;
    }
    let props = m.get("properties").and_then(Value::as_object);
    props.is_some_and(|p| p.values().any(has_rules))
        || m.get("items").is_some_and(has_rules)
        || m.get("additionalProperties").is_some_and(has_rules)
}

/// The name kube-apiserver gives a JSON value's type in its messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `v` is an integer as kube-apiserver decides it: a JSON number without a fractional
/// part (`2.0` is accepted where an integer is declared).
pub(crate) fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "integer" => is_integer(v),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => true,
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn count(schema: &Value, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

/// The structural pass.
struct Structural {
    formats: Formats,
    out: Vec<Violation>,
}

impl Structural {
    fn push(&mut self, here: &Here, value: &Value, rule: Rule, schema: &Value) {
        self.out.push(Violation {
            path: here.schema.clone(),
            value: value.clone(),
            rule,
            schema_type: declared_type(schema).to_string(),
        });
    }

    /// Checks one value against one schema node, then its children.
    fn node(&mut self, schema: &Value, v: &Value, here: &Here) {
        if !schema.is_object() {
            return;
        }
        if !self.shape(schema, v, here) {
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.iter().any(|a| same(a, v))
        {
            let rule = Rule::Enum {
                allowed: allowed.clone(),
            };
            self.push(here, v, rule, schema);
        }
        match v {
            Value::Number(_) => self.number(schema, v, here),
            Value::String(s) => self.string(schema, s, v, here),
            Value::Array(items) => self.array(schema, items, v, here),
            Value::Object(m) => self.object(schema, m, v, here),
            _ => {}
        }
    }

    /// `nullable`, `x-kubernetes-int-or-string` and `type`; false when the value is not of the
    /// declared shape (or is an accepted null), so no further keyword applies to it.
    fn shape(&mut self, schema: &Value, v: &Value, here: &Here) -> bool {
        let t = declared_type(schema);
        if v.is_null() {
            if !flag(schema, "nullable") && !t.is_empty() {
                let rule = Rule::Type {
                    expected: t.to_string(),
                };
                self.push(here, v, rule, schema);
            }
            return false;
        }
        if flag(schema, "x-kubernetes-int-or-string") {
            if is_integer(v) || v.is_string() {
                return true;
            }
            let rule = Rule::Type {
                expected: "integer,string".to_string(),
            };
            self.push(here, v, rule, schema);
            return false;
        }
        if !t.is_empty() && !type_matches(t, v) {
            let rule = Rule::Type {
                expected: t.to_string(),
            };
            self.push(here, v, rule, schema);
            return false;
        }
        true
    }

    fn number(&mut self, schema: &Value, v: &Value, here: &Here) {
        let Some(n) = v.as_f64() else { return };
        if let Some(limit) = schema.get("maximum").filter(|l| l.is_number()) {
            let exclusive = flag(schema, "exclusiveMaximum");
            let max = limit.as_f64().unwrap_or(f64::INFINITY);
            if n > max || (exclusive && n == max) {
                let rule = Rule::Maximum {
                    limit: limit.clone(),
                    exclusive,
                };
                self.push(here, v, rule, schema);
            }
        }
        if let Some(limit) = schema.get("minimum").filter(|l| l.is_number()) {
            let exclusive = flag(schema, "exclusiveMinimum");
            let min = limit.as_f64().unwrap_or(f64::NEG_INFINITY);
            if n < min || (exclusive && n == min) {
                let rule = Rule::Minimum {
                    limit: limit.clone(),
                    exclusive,
                };
                self.push(here, v, rule, schema);
            }
        }
        if let Some(m) = schema.get("multipleOf").filter(|m| m.is_number())
            && !is_multiple(v, m)
        {
            self.push(here, v, Rule::MultipleOf(m.clone()), schema);
        }
    }

    fn string(&mut self, schema: &Value, s: &str, v: &Value, here: &Here) {
        // kube-apiserver counts characters (Unicode code points), not bytes.
        let chars = s.chars().count() as u64;
        if let Some(max) = count(schema, "maxLength").filter(|max| chars > *max) {
            self.push(here, v, Rule::MaxLength(max), schema);
        }
        if let Some(min) = count(schema, "minLength").filter(|min| chars < *min) {
            self.push(here, v, Rule::MinLength(min), schema);
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str)
            && format::pattern(p).is_some_and(|re| !re.is_match(s))
        {
            self.push(here, v, Rule::Pattern(p.to_string()), schema);
        }
        if let Some(f) = schema.get("format").and_then(Value::as_str)
            && !format::valid(f, s, self.formats)
        {
            self.push(here, v, Rule::Format(f.to_string()), schema);
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], v: &Value, here: &Here) {
        if let Some(item_schema) = schema.get("items") {
            for (i, it) in items.iter().enumerate() {
                self.node(item_schema, it, &here.index(i));
            }
        }
        let n = items.len() as u64;
        if let Some(max) = count(schema, "maxItems").filter(|max| n > *max) {
            self.push(here, v, Rule::MaxItems(max), schema);
        }
        if let Some(min) = count(schema, "minItems").filter(|min| n < *min) {
            self.push(here, v, Rule::MinItems(min), schema);
        }
        if flag(schema, "uniqueItems")
            && items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].iter().any(|b| same(a, b)))
        {
            self.push(here, v, Rule::UniqueItems, schema);
        }
    }

    fn object(&mut self, schema: &Value, m: &Map<String, Value>, v: &Value, here: &Here) {
        let n = m.len() as u64;
        if let Some(max) = count(schema, "maxProperties").filter(|max| n > *max) {
            self.push(here, v, Rule::MaxProperties(max), schema);
        }
        if let Some(min) = count(schema, "minProperties").filter(|min| n < *min) {
            self.push(here, v, Rule::MinProperties(min), schema);
        }
        let required = schema.get("required").and_then(Value::as_array);
        for r in required.into_iter().flatten().filter_map(Value::as_str) {
            if !m.contains_key(r) {
                self.push(&here.prop(r), &Value::Null, Rule::Required, schema);
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(props) = props {
            for (k, ps) in props {
                if let Some(child) = m.get(k) {
                    self.node(ps, child, &here.prop(k));
                }
            }
        }
        let additional = schema.get("additionalProperties");
        let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
        for (k, child) in m {
            if props.is_some_and(|p| p.contains_key(k)) {
                continue;
            }
            match additional {
                Some(a @ Value::Object(_)) => self.node(a, child, &here.key(k)),
                Some(Value::Bool(false)) if !preserve => {
                    self.push(&here.prop(k), child, Rule::NotAllowed, schema)
                }
                _ => {}
            }
        }
    }
}

/// The node's declared `type`, empty when it declares none.
pub(crate) fn declared_type(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("")
}

/// JSON equality with numbers compared by value (`1` and `1.0` are the same number).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
        }
        _ => a == b,
    }
}

/// `multipleOf`: exact for integers; for other numbers, the quotient must be whole within a
/// relative epsilon (0.1 is not exactly representable, 0.3 is still a multiple of it).
fn is_multiple(v: &Value, m: &Value) -> bool {
    if let (Some(a), Some(b)) = (v.as_i64(), m.as_i64()) {
        return b == 0 || a % b == 0;
    }
    let (Some(a), Some(b)) = (v.as_f64(), m.as_f64()) else {
        return true;
    };
    if b == 0.0 {
        return true;
    }
    let q = a / b;
    (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
}
