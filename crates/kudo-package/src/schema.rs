//! Parameter declarations as schemas.
//!
//! A parameter's declaration (`kudo_api::Parameter`: KUDO's type, enum and default plus the
//! JSON-Schema keywords of [`kudo_api::ParameterSchema`]) becomes one schema in two dialects:
//!
//! - kube's structural-schema dialect ([`param_schema`], [`parameters_schema`]): what the one
//!   validator (`kudo_schema`) checks values with, and what a per-operator CRD's `spec` is made
//!   of. Boolean `exclusiveMinimum`/`exclusiveMaximum` beside `minimum`/`maximum`, `map` as
//!   `object`.
//! - JSON Schema draft 2020-12 ([`json_schema`]): what `package schema` prints for editors.
//!
//! Values are strings on the cluster (KUDO); [`typed_value`] decodes one by its declared type, the
//! way the templates and Go's `strconv` read it, so it can be checked against the schema.

use std::collections::BTreeMap;

use kudo_api::{Parameter, ValidationRule};
use serde_json::{Map, Number, Value, json};

use crate::params::{decode_structured, parse_bool};

/// The `$schema` of [`json_schema`]'s documents.
pub const JSON_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// A KUDO type name as a schema `type` (`map` is `object`); `None` for a type KUDO does not know,
/// which KUDO treats as a string but a schema had better not guess.
pub fn schema_type(value_type: &str) -> Option<&'static str> {
    match value_type {
        "" | "string" => Some("string"),
        "integer" => Some("integer"),
        "number" => Some("number"),
        "boolean" => Some("boolean"),
        "array" => Some("array"),
        "map" | "object" => Some("object"),
        _ => None,
    }
}

/// Decodes a parameter's string value by its declared type: integers and numbers as Go's
/// `strconv` parses them, booleans as `strconv.ParseBool`, arrays and maps from YAML, anything
/// else as the string. `None` when the string is not of its type (KUDO's type check reports that),
/// when it decodes to `null`, or for a number JSON cannot hold (`NaN`, `Inf`).
pub fn typed_value(p: &Parameter, s: &str) -> Option<Value> {
    match schema_type(p.value_type()) {
        Some("integer") => s.parse::<i64>().ok().map(Value::from),
        Some("number") => match s.parse::<i64>() {
            Ok(i) => Some(Value::from(i)),
            Err(_) => s
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number),
        },
        Some("boolean") => parse_bool(s).map(Value::Bool),
        Some("array" | "object") => decode_structured(s).ok().filter(|v| !v.is_null()),
        _ => Some(Value::String(s.to_string())),
    }
}

/// Applies `f` to every schema node of a raw JSON-Schema value: the node itself, then (after `f`)
/// its `items`, each of its `properties` and an `additionalProperties` schema, recursively.
fn each_node(v: &Value, f: &dyn Fn(&mut Map<String, Value>)) -> Value {
    let Value::Object(node) = v else { return v.clone() };
    let mut node = node.clone();
    f(&mut node);
    if let Some(items) = node.get_mut("items") {
        *items = each_node(items, f);
    }
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        for sub in props.values_mut() {
            *sub = each_node(sub, f);
        }
    }
    if let Some(extra) = node.get_mut("additionalProperties")
        && extra.is_object()
    {
        *extra = each_node(extra, f);
    }
    Value::Object(node)
}

/// One bound from the 2020-12 pair (`minimum`, numeric `exclusiveMinimum`) to kube's form
/// (`minimum` with boolean `exclusiveMinimum`): the stricter of the two when both are given.
fn kube_bound(node: &mut Map<String, Value>, inclusive: &str, exclusive: &str, lower: bool) {
    let Some(excl) = node.get(exclusive).filter(|v| v.is_number()).cloned() else {
        return;
    };
    node.remove(exclusive);
    let stricter = match (node.get(inclusive).and_then(Value::as_f64), excl.as_f64()) {
        (Some(inc), Some(ex)) => {
            if lower {
                ex >= inc
            } else {
                ex <= inc
            }
        }
        _ => true,
    };
    if stricter {
        node.insert(inclusive.to_string(), excl);
        node.insert(exclusive.to_string(), Value::Bool(true));
    }
}

/// A raw JSON-Schema 2020-12 (sub)schema from `params.yaml` in kube's dialect: `map` → `object`,
/// numeric exclusive bounds → boolean ones beside `minimum`/`maximum`. Anything else verbatim (a
/// keyword kube does not know is left for `kudo_schema::check_schema` to name).
pub fn kube_schema(v: &Value) -> Value {
    each_node(v, &|node| {
        if node.get("type").and_then(Value::as_str) == Some("map") {
            node.insert("type".into(), "object".into());
        }
        kube_bound(node, "minimum", "exclusiveMinimum", true);
        kube_bound(node, "maximum", "exclusiveMaximum", false);
    })
}

/// The same raw schema as JSON Schema 2020-12 for editors: only `map` becomes `object`.
fn json_schema_node(v: &Value) -> Value {
    each_node(v, &|node| {
        if node.get("type").and_then(Value::as_str) == Some("map") {
            node.insert("type".into(), "object".into());
        }
    })
}

/// A parameter's own keywords as one JSON-Schema 2020-12 node (the form `params.yaml` holds):
/// type, description, typed default and enum, and every keyword of [`kudo_api::ParameterSchema`].
fn declared_node(p: &Parameter) -> Map<String, Value> {
    let mut node = Map::new();
    if let Some(t) = schema_type(p.value_type()) {
        node.insert("type".into(), t.into());
    }
    if !p.description.is_empty() {
        node.insert("description".into(), p.description.clone().into());
    }
    if let Some(d) = p.default.as_deref().and_then(|d| typed_value(p, d)) {
        node.insert("default".into(), d);
    }
    if let Some(vals) = &p.r#enum {
        let typed: Vec<Value> = vals.iter().filter_map(|v| typed_value(p, v)).collect();
        node.insert("enum".into(), Value::Array(typed));
    }
    if let Ok(Value::Object(keywords)) = serde_json::to_value(&p.schema) {
        node.extend(keywords);
    }
    node
}

/// A parameter as a kube structural schema (the validator's and the per-operator CRD's dialect).
/// `immutable` is not expressed: it needs the old value and is enforced by the admission rules.
pub fn param_schema(p: &Parameter) -> Value {
    kube_schema(&Value::Object(declared_node(p)))
}

/// Names of the parameters a value must be given for (required, no default), in declaration order.
fn required_names<'a>(defs: impl Iterator<Item = &'a Parameter>) -> Vec<Value> {
    defs.filter(|p| p.needs_value())
        .map(|p| Value::String(p.name.clone()))
        .collect()
}

fn rules_value(rules: &[ValidationRule]) -> Value {
    serde_json::to_value(rules).unwrap_or(Value::Null)
}

/// The whole parameter set as one kube object schema: a property per parameter (sensitive ones
/// only when `include_sensitive`, for a CRD must not have them as fields), `required` for the
/// required parameters without default, and the package-level `rules` as its
/// `x-kubernetes-validations`.
pub fn parameters_schema(defs: &[Parameter], rules: &[ValidationRule], include_sensitive: bool) -> Value {
    let shown = || {
        defs.iter()
            .filter(move |p| include_sensitive || !p.is_sensitive())
    };
    let properties: Map<String, Value> = shown().map(|p| (p.name.clone(), param_schema(p))).collect();
    let mut schema = json!({"type": "object", "properties": properties});
    let required = required_names(shown());
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    if !rules.is_empty() {
        schema["x-kubernetes-validations"] = rules_value(rules);
    }
    schema
}

/// The package-level rules alone as a kube object schema: what the values together are checked
/// with once each value passed its own checks (which a full [`parameters_schema`] would repeat).
pub fn rules_schema(rules: &[ValidationRule]) -> Value {
    json!({"type": "object", "x-kubernetes-validations": rules_value(rules)})
}

/// A parameter as a JSON Schema 2020-12 property for editors: the declared node with the
/// display name as `title`, nested schemas with `map` spelled `object`, and `writeOnly` for a
/// sensitive parameter (its value ends up in a Secret, never in the Instance).
fn json_property(p: &Parameter) -> Value {
    let mut node = declared_node(p);
    if !p.display_name.is_empty() {
        node.insert("title".into(), p.display_name.clone().into());
    }
    if p.is_sensitive() {
        node.insert("writeOnly".into(), true.into());
    }
    json_schema_node(&Value::Object(node))
}

/// The parameters of a package as a JSON Schema 2020-12 document describing a values file for
/// `install -P`: an object with one property per parameter. Undeclared keys stay allowed, because
/// `-P` accepts them (KUDO ignores values nothing declares). The package-level rules are CEL,
/// which no JSON-Schema validator evaluates: they are kept as the `x-kubernetes-validations`
/// annotation (validators ignore unknown keywords) and listed in the description.
pub fn json_schema(title: &str, defs: &[Parameter], rules: &[ValidationRule]) -> Value {
    let properties: Map<String, Value> = defs.iter().map(|p| (p.name.clone(), json_property(p))).collect();
    let mut description =
        format!("Parameter values for {title}, as given to `kubectl kudo install -P FILE`.");
    for r in rules {
        let msg = if r.message.is_empty() { &r.rule } else { &r.message };
        description.push_str(&format!("\nRule: {msg} ({})", r.rule));
    }
    let mut doc = json!({
        "$schema": JSON_SCHEMA_DIALECT,
        "title": title,
        "description": description,
        "type": "object",
        "properties": properties,
    });
    let required = required_names(defs.iter());
    if !required.is_empty() {
        doc["required"] = Value::Array(required);
    }
    if !rules.is_empty() {
        doc["x-kubernetes-validations"] = rules_value(rules);
    }
    doc
}

/// The typed values the package-level rules see: each declared parameter's effective value (as
/// the templates see it: the value given, else the default) decoded by its type; parameters
/// without one, or whose value does not decode (`""` for a number), are absent (rules test them
/// with `has(self.X)`).
pub fn typed_values(defs: &[Parameter], values: &BTreeMap<String, String>) -> Map<String, Value> {
    defs.iter()
        .filter_map(|p| {
            let s = values.get(&p.name).or(p.default.as_ref())?;
            Some((p.name.clone(), typed_value(p, s)?))
        })
        .collect()
}

/// [`json_schema`] of a package's parameters, titled by its OperatorVersion name.
pub fn package_json_schema(pkg: &crate::Package) -> Value {
    json_schema(
        &pkg.operator_version_name(),
        &pkg.params.definitions(),
        &pkg.params.validations,
    )
}
