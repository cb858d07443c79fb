//! One validator of Kubernetes structural schemas — the OpenAPI v3 subset CustomResourceDefinitions
//! use (`type`, `format`, `enum`, bounds, lengths, `pattern`, `items`, `properties`,
//! `additionalProperties`, `required`, `nullable`, `x-kubernetes-int-or-string`,
//! `x-kubernetes-preserve-unknown-fields`) plus CEL `x-kubernetes-validations`, including
//! transition rules over `oldSelf`.
//!
//! Used everywhere a value meets a schema: the embedded API server validates custom
//! objects with it, and `package verify`, the CLI and the manager validate operator parameters with
//! it (a parameter's declaration is turned into one of these schemas). Written here rather than taken
//! from a JSON-Schema crate because what matters is kube-apiserver's behaviour and wording
//! (`spec.X in body should be less than or equal to 9`), which is checked against a real
//! kube-apiserver v1.28 by a differential test, and its dialect (boolean `exclusiveMinimum`,
//! `x-kubernetes-*`), which no JSON-Schema crate implements.
//!
//! The dialect is kube's: `exclusiveMinimum`/`exclusiveMaximum` are booleans beside
//! `minimum`/`maximum`. Callers holding JSON-Schema 2020-12 forms convert before calling.

use serde_json::Value;

mod cel;
mod check;
mod format;
mod message;
mod walk;

pub use message::KubeCause;

/// Which rule a value broke, with the rule's own figures.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// The value's JSON type is not the declared `type` (`integer`, `number`, `string`, `boolean`,
    /// `array`, `object`).
    Type {
        /// The declared `type`.
        expected: String,
    },
    /// The value is not one of the schema's `enum` values.
    Enum {
        /// The `enum` values, in schema order.
        allowed: Vec<Value>,
    },
    /// The number is above `maximum` (or equal to it when `exclusiveMaximum` is true).
    Maximum {
        /// The schema's `maximum`.
        limit: Value,
        /// kube's boolean `exclusiveMaximum`: the limit itself is not allowed.
        exclusive: bool,
    },
    /// The number is below `minimum` (or equal to it when `exclusiveMinimum` is true).
    Minimum {
        /// The schema's `minimum`.
        limit: Value,
        /// kube's boolean `exclusiveMinimum`: the limit itself is not allowed.
        exclusive: bool,
    },
    /// The number is not a multiple of the schema's `multipleOf`, which this holds.
    MultipleOf(Value),
    /// The string has more characters than `maxLength`, which this holds.
    MaxLength(u64),
    /// The string has fewer characters than `minLength`, which this holds.
    MinLength(u64),
    /// The string does not match the schema's `pattern`, which this holds.
    Pattern(String),
    /// The string is not valid in the checked `format` this names (see [`Formats`]).
    Format(String),
    /// The array has more elements than `maxItems`, which this holds.
    MaxItems(u64),
    /// The array has fewer elements than `minItems`, which this holds.
    MinItems(u64),
    /// The array has equal elements although the schema sets `uniqueItems`.
    UniqueItems,
    /// The object has more properties than `maxProperties`, which this holds.
    MaxProperties(u64),
    /// The object has fewer properties than `minProperties`, which this holds.
    MinProperties(u64),
    /// A `required` property is absent.
    Required,
    /// A property the schema does not allow (`additionalProperties: false`).
    NotAllowed,
    /// A CEL `x-kubernetes-validations` rule evaluated to false (or failed to evaluate).
    Cel {
        /// The rule's CEL expression as the schema writes it.
        rule: String,
        /// The rule's `message`, reported instead of the expression when set.
        message: Option<String>,
    },
    /// Validation rules (CEL) were not evaluated because the value broke a structural rule that
    /// makes them meaningless (a wrong type, a missing required field, a bad format, a list
    /// or string over its limit) — kube-apiserver reports this once, at the root.
    NotChecked,
}

/// One broken rule at one place in the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Dotted field path as kube-apiserver prints it (`spec.NODE_COUNT`, `spec.list[2]`); the
    /// caller's `path` prefix included. A map key is `.key` in structural violations and `[key]`
    /// in CEL ones, as kube writes them; empty for [`Rule::NotChecked`].
    pub path: String,
    /// The offending value (for `Required`, `Value::Null`).
    pub value: Value,
    /// Which rule was broken, with the schema's figures.
    pub rule: Rule,
    /// The declared `type` of the schema node that holds the rule (empty when it declares none):
    /// kube-apiserver shows it as the "value" of a CEL rule's failure (`Invalid value: "object"`).
    pub schema_type: String,
}

impl Violation {
    /// The field error as kube-apiserver v1.28 words it in a 422's message and causes, e.g.
    /// `spec.NODE_COUNT: Invalid value: 12: spec.NODE_COUNT in body should be less than or equal to 9`.
    pub fn kube_message(&self) -> String {
        self.kube_cause().to_string()
    }

    /// The field error as a 422's `details.causes` entry: reason, field and message.
    pub fn kube_cause(&self) -> KubeCause {
        message::kube_cause(self)
    }

    /// The short form for operator parameters, without the path: `12 is greater than the maximum of 9`.
    pub fn short(&self) -> String {
        let v = &self.value;
        match &self.rule {
            Rule::Type { expected } => format!("{v} is not of type {expected}"),
            Rule::Enum { allowed } => format!("{v} is not one of {}", list(allowed)),
            Rule::Maximum {
                limit,
                exclusive: false,
            } => format!("{v} is greater than the maximum of {limit}"),
            Rule::Maximum {
                limit,
                exclusive: true,
            } => format!("{v} is not less than the exclusive maximum of {limit}"),
            Rule::Minimum {
                limit,
                exclusive: false,
            } => format!("{v} is less than the minimum of {limit}"),
            Rule::Minimum {
                limit,
                exclusive: true,
            } => format!("{v} is not greater than the exclusive minimum of {limit}"),
            Rule::MultipleOf(m) => format!("{v} is not a multiple of {m}"),
            Rule::MaxLength(n) => format!("{v} is longer than {n} characters"),
            Rule::MinLength(n) => format!("{v} is shorter than {n} characters"),
            Rule::Pattern(p) => format!("{v} does not match the pattern {p:?}"),
            Rule::Format(f) => format!("{v} is not a valid {f}"),
            Rule::MaxItems(n) => format!("{v} has more than {n} items"),
            Rule::MinItems(n) => format!("{v} has fewer than {n} items"),
            Rule::UniqueItems => format!("{v} has duplicate items"),
            Rule::MaxProperties(n) => format!("{v} has more than {n} properties"),
            Rule::MinProperties(n) => format!("{v} has fewer than {n} properties"),
            Rule::Required => "is required".to_string(),
            Rule::NotAllowed => "is not an allowed field".to_string(),
            Rule::Cel { message: Some(m), .. } => m.clone(),
            Rule::Cel { rule, message: None } => format!("failed rule: {rule}"),
            Rule::NotChecked => {
                "some validation rules were not checked because the value was invalid".to_string()
            }
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.short())
    }
}

fn list(vs: &[Value]) -> String {
    let items: Vec<String> = vs.iter().map(Value::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// Which `format` values are checked. kube-apiserver checks only its own list (unknown formats
/// are ignored); operator parameters also know `quantity`, `duration`, `cron` and `dns1123-label`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Formats {
    /// Only the formats kube-apiserver checks: what custom objects are validated with.
    #[default]
    Kube,
    /// kube's formats plus `quantity`, `duration`, `cron` and `dns1123-label` (parameters).
    Extended,
}

/// Validates `value` (and, for transition rules, the `old` value of an update) against `schema`.
/// `path` is the prefix of every violation's path (`spec` for a custom object's spec, a parameter's
/// name for a parameter). Returns every violation: first the structural ones (in schema order),
/// then the CEL rules' — which, as in kube-apiserver, are only evaluated when no structural
/// violation makes them meaningless (else one [`Rule::NotChecked`] stands for them).
pub fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    formats: Formats,
) -> Vec<Violation> {
    walk::validate(schema, value, old, path, formats)
}

/// A mistake in a schema itself: a keyword of the wrong type, a `pattern` that does not compile,
/// a CEL rule that does not compile, bounds that contradict each other.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaError {
    /// Dotted path of the schema node (`properties.NODE_COUNT`); empty at the root.
    pub path: String,
    /// The keyword at fault, e.g. `pattern` or `minimum`.
    pub keyword: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.keyword, self.message)
        } else {
            write!(f, "{}: {}: {}", self.path, self.keyword, self.message)
        }
    }
}

/// Checks a schema itself; every mistake found, empty when it is usable.
pub fn check_schema(schema: &Value) -> Vec<SchemaError> {
    check::check(schema)
}
