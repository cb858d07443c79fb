//! The typed API of an operator (a kudo-rs extension): the CustomResourceDefinition
//! made from an OperatorVersion's `api:` section and its parameters, the checks of that section,
//! who owns an existing CRD of that name, and the mapping between a typed object's `spec` and the
//! Instance's parameters (KUDO's strings).
//!
//! The CRD is a pure function of the OperatorVersion, so `package verify`, `install`/`upgrade` and
//! tests all see the same object; the CLI creates it (with the user's rights, like the
//! OperatorVersion itself) and refuses to touch a CRD of that name that another operator or tool
//! owns ([`ownership`]).

use std::collections::BTreeMap;

use kudo_api::{OperatorVersion, Parameter, TypedApi, ValidationRule};
use serde_json::{Map, Value, json};

use crate::params::wrap_value;
use crate::schema::{parameters_schema, typed_value};

/// Label on a typed-API CRD naming the operator it was made for: the mark of ownership.
pub const OPERATOR_LABEL: &str = kudo_api::labels::OPERATOR;
/// Annotation on a typed-API CRD: the OperatorVersion that made it (new objects get Instances of it).
pub const OPERATOR_VERSION_ANNOTATION: &str = "kudo-rs.dev/operator-version";

/// The CRD of the OperatorVersion's typed API; `None` when it declares none.
pub fn crd(ov: &OperatorVersion) -> Option<Value> {
    let api = ov.spec.api.as_ref()?;
    let version = json!({
        "name": api.version(),
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": {
            "type": "object",
            "description": format!("{} of the KUDO operator {}: its spec holds the operator's parameters, typed; \
                an Instance of the same name runs its plans.", api.kind, ov.spec.operator.name),
            "properties": {
                "spec": spec_schema(ov),
                "status": status_schema(),
            },
        }},
        "subresources": {"status": {}},
        "additionalPrinterColumns": printer_columns(),
    });
    let mut names = json!({
        "kind": api.kind,
        "listKind": format!("{}List", api.kind),
        "plural": api.plural(),
        "singular": api.kind.to_lowercase(),
    });
    if !api.short_names.is_empty() {
        names["shortNames"] = json!(api.short_names);
    }
    Some(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": api.crd_name(),
            "labels": {OPERATOR_LABEL: ov.spec.operator.name, "app.kubernetes.io/managed-by": "kudo-rs"},
            "annotations": {OPERATOR_VERSION_ANNOTATION: ov.metadata.name},
        },
        "spec": {"group": api.group, "scope": "Namespaced", "names": names, "versions": [version]},
    }))
}

/// `spec`: one field per parameter that is not sensitive (those come from `parameterSources`),
/// named exactly as the parameter and typed by its schema ([`crate::schema::parameters_schema`]);
/// the package-level rules that name no sensitive parameter as its CEL validations.
fn spec_schema(ov: &OperatorVersion) -> Value {
    let defs = &ov.spec.parameters;
    let sensitive: Vec<&str> = defs
        .iter()
        .filter(|p| p.is_sensitive())
        .map(|p| p.name.as_str())
        .collect();
    let rules: Vec<ValidationRule> = ov
        .spec
        .parameter_validations
        .iter()
        .filter(|r| !sensitive.iter().any(|n| r.rule.contains(&format!("self.{n}"))))
        .cloned()
        .collect();
    let mut spec = parameters_schema(defs, &rules, false);
    if let Some(props) = spec["properties"].as_object_mut() {
        for p in defs.iter().filter(|p| !p.is_sensitive()) {
            if let Some(field) = props.get_mut(&p.name) {
                crd_field(p, field);
            }
        }
        props.insert("parameterSources".into(), parameter_sources_schema());
    }
    spec
}

/// What a CRD needs beyond the parameter's schema: a `type` everywhere (structural schemas), unknown
/// fields kept where the parameter declares no nested schema, and immutability as a transition rule.
fn crd_field(p: &Parameter, field: &mut Value) {
    if field.get("type").is_none() {
        field["type"] = json!("string");
    }
    match field["type"].as_str() {
        Some("array") if field.get("items").is_none() => {
            field["items"] = json!({"x-kubernetes-preserve-unknown-fields": true});
        }
        Some("object")
            if field.get("properties").is_none() && field.get("additionalProperties").is_none() =>
        {
            field["x-kubernetes-preserve-unknown-fields"] = json!(true);
        }
        _ => {}
    }
    if p.is_immutable() {
        let rule = json!({"rule": "self == oldSelf", "message": "Value is immutable"});
        match field
            .get_mut("x-kubernetes-validations")
            .and_then(Value::as_array_mut)
        {
            Some(rules) => rules.push(rule),
            None => field["x-kubernetes-validations"] = json!([rule]),
        }
    }
}

fn parameter_sources_schema() -> Value {
    json!({
        "type": "object",
        "description": "Parameters whose values come from Secrets (sensitive parameters).",
        "additionalProperties": {"type": "object", "properties": {"secretKeyRef": {
            "type": "object", "required": ["name", "key"],
            "properties": {"name": {"type": "string"}, "key": {"type": "string"}},
        }}},
    })
}

/// `status` mirrors the Instance's: the plans and conditions as they are, plus the summary the
/// printer columns show.
fn status_schema() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn printer_columns() -> Value {
    json!([
        {"name": "Plan", "type": "string", "jsonPath": ".status.plan"},
        {"name": "Status", "type": "string", "jsonPath": ".status.status"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ])
}

/// Label of the ClusterRoles that `kubectl kudo init --least-privilege`'s role
/// `kudo-manager-typed-apis` aggregates: what the manager may do with typed objects.
pub const AGGREGATE_TO_MANAGER: &str = "kudo-rs.dev/aggregate-to-manager";

/// The ClusterRoles of a typed API: the manager's (watch the objects, write their status, patch a
/// rollout's parameters into them; aggregated
/// into its least-privilege role), and users' — the built-in `admin`/`edit` roles get full access
/// to the objects and `view` reads them, as for the `kudo.dev` kinds. `admin`/`edit` also read
/// everything `view` reads (the status): Kubernetes refuses a binding that grants more than its
/// author holds, so a namespace admin could otherwise no longer bind `view` once a typed API is
/// installed.
pub fn cluster_roles(ov: &OperatorVersion) -> Vec<Value> {
    let Some(api) = &ov.spec.api else {
        return Vec::new();
    };
    let (group, plural, crd) = (api.group.as_str(), api.plural(), api.crd_name());
    let status = format!("{plural}/status");
    let role = |suffix: &str, labels: Value, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": format!("kudo-rs:typed:{crd}:{suffix}"), "labels": labels}, "rules": rules})
    };
    let agg = |r: &str| format!("rbac.authorization.k8s.io/aggregate-to-{r}");
    let managed = json!({OPERATOR_LABEL: ov.spec.operator.name, "app.kubernetes.io/managed-by": "kudo-rs"});
    let with = |extra: &[String]| {
        let mut l = managed.clone();
        for k in extra {
            l[k.as_str()] = json!("true");
        }
        l
    };
    vec![
        role(
            "manager",
            with(&[AGGREGATE_TO_MANAGER.to_string()]),
            json!([
                // patch: a fleet rollout sets parameters through the typed object, as `update` does.
                {"apiGroups": [group], "resources": [plural], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": [group], "resources": [status], "verbs": ["get", "patch", "update"]},
            ]),
        ),
        role(
            "edit",
            with(&[agg("admin"), agg("edit")]),
            json!([
                {"apiGroups": [group], "resources": [plural],
                 "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                {"apiGroups": [group], "resources": [status], "verbs": ["get", "list", "watch"]},
            ]),
        ),
        role(
            "view",
            with(&[agg("view")]),
            json!([
                {"apiGroups": [group], "resources": [plural, status], "verbs": ["get", "list", "watch"]},
            ]),
        ),
    ]
}

/// The Instance parameters a typed object's `spec` sets: every field named as a declared,
/// non-sensitive parameter, as KUDO's string (`parameterSources` and unknown fields left out).
pub fn parameters_of(ov: &OperatorVersion, spec: &Value) -> BTreeMap<String, String> {
    ov.spec
        .parameters
        .iter()
        .filter(|p| !p.is_sensitive())
        .filter_map(|p| {
            let v = spec.get(&p.name).filter(|v| !v.is_null())?;
            Some((p.name.clone(), wrap_value(v, p.value_type())))
        })
        .collect()
}

/// A parameter value [`spec_fields`] cannot write into a typed object's `spec`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecFieldError {
    /// Not declared, or sensitive (sensitive values never go into a typed object).
    #[error("parameter {0} is not a field of the typed API")]
    NotAField(String),
    /// The string does not parse as the parameter's declared type.
    #[error("parameter {name}: {value:?} is not of type {expected}")]
    WrongType {
        /// The parameter.
        name: String,
        /// The value given.
        value: String,
        /// The declared type (`integer`, `boolean`, …).
        expected: String,
    },
}

/// The typed `spec` fields for Instance parameter strings (what `kubectl kudo update` writes into
/// a typed object). Parameters not declared, sensitive, or not of their type are returned as errors.
pub fn spec_fields(
    ov: &OperatorVersion,
    values: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, SpecFieldError> {
    let mut out = Map::new();
    for (name, s) in values {
        let p = ov
            .spec
            .parameters
            .iter()
            .find(|p| &p.name == name)
            .filter(|p| !p.is_sensitive())
            .ok_or_else(|| SpecFieldError::NotAField(name.clone()))?;
        let v = typed_value(p, s).ok_or_else(|| SpecFieldError::WrongType {
            name: name.clone(),
            value: s.clone(),
            expected: p.value_type().to_string(),
        })?;
        out.insert(name.clone(), v);
    }
    Ok(out)
}

/// What makes an existing object's `spec` invalid under a new spec schema (the upgrade guard): a
/// field set that is no longer a parameter, or a value the new schema refuses (narrowed enum or
/// bound, changed type), each as kube-apiserver would word it. Checked with the one validator
/// (`kudo_schema`).
pub fn breaking_fields(spec_schema: &Value, spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(obj), Some(props)) = (spec.as_object(), spec_schema["properties"].as_object()) {
        for key in obj.keys().filter(|k| !props.contains_key(*k)) {
            out.push(format!(
                "spec.{key} is set, and the new version has no such parameter"
            ));
        }
    }
    for v in kudo_schema::validate(spec_schema, spec, None, "spec", kudo_schema::Formats::Kube) {
        out.push(v.kube_message());
    }
    out
}

/// Every object of the typed kind (`objects`, as the API server returns them) whose spec the new
/// `crd`'s schema would refuse, as `KIND NS/NAME: problem` ([`breaking_fields`]): the upgrade guard
/// of `install`/`upgrade` and of the manager's package sources.
pub fn broken_objects(api: &TypedApi, crd: &Value, objects: &[Value]) -> Vec<String> {
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let mut out = Vec::new();
    for o in objects {
        let meta = &o["metadata"];
        let who = format!(
            "{} {}/{}",
            api.kind,
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default()
        );
        let spec = o.get("spec").cloned().unwrap_or(Value::Null);
        for problem in breaking_fields(schema, &spec) {
            out.push(format!("{who}: {problem}"));
        }
    }
    out
}

/// Whether an existing CRD of the typed API's name may be written by this operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// No CRD of that name exists: it may be created.
    Absent,
    /// The CRD is labelled with this operator's name: it may be updated.
    Ours,
    /// Made by something else; the text says by what, for the error message.
    Foreign(String),
}

/// Who owns `existing` (the CRD of that name on the cluster, if any): only a CRD labelled with this
/// operator's name is ours to update.
pub fn ownership(existing: Option<&Value>, operator: &str) -> Ownership {
    let Some(crd) = existing else {
        return Ownership::Absent;
    };
    match crd
        .pointer("/metadata/labels")
        .and_then(|l| l.get(OPERATOR_LABEL))
        .and_then(Value::as_str)
    {
        Some(o) if o == operator => Ownership::Ours,
        Some(o) => Ownership::Foreign(format!("the KUDO operator {o}")),
        None => Ownership::Foreign("something other than kudo-rs".into()),
    }
}

/// `package verify`'s checks of an `api:` section: group and kind present and well-formed, names
/// lower-case DNS labels, not the kudo.dev group itself, fields that do not collide with the
/// parameters.
pub fn check_api(api: &TypedApi, params: &[Parameter]) -> Vec<String> {
    let mut errs = Vec::new();
    let mut err = |m: String| errs.push(format!("operator.yaml: api: {m}"));
    if api.group.is_empty() || !is_dns_subdomain(&api.group) || !api.group.contains('.') {
        err(format!(
            "group {:?} must be a DNS subdomain with at least one dot (e.g. galera.example.com)",
            api.group
        ));
    }
    if api.group == kudo_api::GROUP {
        err(format!("group {} is KUDO's own", kudo_api::GROUP));
    }
    let kind_ok = api.kind.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && api.kind.chars().all(|c| c.is_ascii_alphanumeric());
    if !kind_ok {
        err(format!(
            "kind {:?} must start with an upper-case letter and hold only letters and digits",
            api.kind
        ));
    }
    let version_ok = api.version.is_empty() || is_dns_label(&api.version) && api.version.starts_with('v');
    if !version_ok {
        err(format!(
            "version {:?} must look like v1, v1beta1, v2alpha1",
            api.version
        ));
    }
    for n in std::iter::once(&api.plural)
        .chain(&api.short_names)
        .filter(|n| !n.is_empty())
    {
        if !is_dns_label(n) {
            err(format!("name {n:?} must be a lower-case DNS label"));
        }
    }
    if params.iter().any(|p| p.name == "parameterSources") {
        err("a parameter named parameterSources collides with the typed API's field of that name".into());
    }
    errs
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests;
