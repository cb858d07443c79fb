//! CustomResourceDefinitions: acceptance (status conditions), serving their kinds, and structural-schema
//! defaulting and pruning of custom objects.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, Cause};
use crate::meta;
use crate::registry::{CustomInfo, PrinterColumn, Registry, ResourceDef, ScaleSpec};

const CRD_GROUP: &str = "apiextensions.k8s.io";

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(|x| x.as_str()).unwrap_or("")
}

/// Validate a CRD and set its status the way the real server's controllers do right after creation
/// (`NamesAccepted` and `Established` true, `acceptedNames`, `storedVersions`).
pub fn accept_crd(registry: &Registry, crd: &mut Value) -> Result<(), ApiError> {
    let name = meta::name(crd).to_string();
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let kind = s(crd, "/spec/names/kind").to_string();
    let mut causes = Vec::new();
    if group.is_empty() {
        causes.push(Cause::required("spec.group", ""));
    }
    if plural.is_empty() {
        causes.push(Cause::required("spec.names.plural", ""));
    }
    if kind.is_empty() {
        causes.push(Cause::required("spec.names.kind", ""));
    }
    let scope = s(crd, "/spec/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            field: "spec.scope".into(),
            message: format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        });
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            &json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::invalid(
            "spec.versions",
            &json!([]),
            "must have exactly one version marked as storage version",
        ));
    }
    let storage: Vec<&Value> = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .collect();
    if !versions.is_empty() && storage.len() != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            &json!(versions.iter().map(|v| v["name"].clone()).collect::<Vec<_>>()),
            "must have exactly one version marked as storage version",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.pointer("/schema/openAPIV3Schema").is_none() {
            causes.push(Cause::required(
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "schemas are required",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            CRD_GROUP,
            "CustomResourceDefinition",
            &name,
            causes,
        ));
    }
    // A built-in or another CRD already owning the names is a naming conflict.
    for d in registry.all() {
        let owner = d.custom.as_ref().map(|c| c.crd_name.as_str());
        if d.group == group && d.plural == plural && owner != Some(name.as_str()) {
            return Err(ApiError::invalid(
                CRD_GROUP,
                "CustomResourceDefinition",
                &name,
                vec![Cause::invalid(
                    "spec.names.plural",
                    &json!(plural),
                    "is already in use",
                )],
            ));
        }
    }
    let mut accepted = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    if let Some(a) = accepted.as_object_mut() {
        a.entry("singular").or_insert(json!(kind.to_lowercase()));
        a.entry("listKind").or_insert(json!(format!("{kind}List")));
    }
    if let Some(n) = crd.pointer_mut("/spec/names").and_then(|n| n.as_object_mut()) {
        n.entry("singular").or_insert(json!(kind.to_lowercase()));
        n.entry("listKind").or_insert(json!(format!("{kind}List")));
    }
    let storage_name = storage.first().map(|v| v["name"].clone()).unwrap_or(Value::Null);
    let mut stored: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    if !stored.contains(&storage_name) {
        stored.push(storage_name);
    }
    let existing = crd
        .pointer("/status/conditions")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    let cond = |t: &str, reason: &str, message: &str| {
        let prev = existing.iter().find(|c| c["type"] == t && c["status"] == "True");
        json!({
            "type": t,
            "status": "True",
            "lastTransitionTime": prev.map(|p| p["lastTransitionTime"].clone()).unwrap_or_else(|| json!(meta::now_rfc3339())),
            "reason": reason,
            "message": message,
        })
    };
    crd["status"] = json!({
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    });
    Ok(())
}

/// The served definitions of a (stored, accepted) CRD: one per served version.
pub fn defs_from_crd(crd: &Value) -> Vec<ResourceDef> {
    let name = meta::name(crd).to_string();
    let group = s(crd, "/spec/group").to_string();
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let kind = names["kind"].as_str().unwrap_or("").to_string();
    let plural = names["plural"].as_str().unwrap_or("").to_string();
    let singular = names["singular"]
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| kind.to_lowercase());
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let namespaced = s(crd, "/spec/scope") != "Cluster";
    let mut out = Vec::new();
    for v in crd
        .pointer("/spec/versions")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        if v["served"].as_bool() == Some(false) {
            continue;
        }
        let scale = v.pointer("/subresources/scale").map(|sc| ScaleSpec {
            spec_replicas: sc["specReplicasPath"].as_str().unwrap_or(".spec.replicas").into(),
            status_replicas: sc["statusReplicasPath"]
                .as_str()
                .unwrap_or(".status.replicas")
                .into(),
            label_selector: sc["labelSelectorPath"].as_str().map(String::from),
        });
        let printer_columns = v["additionalPrinterColumns"]
            .as_array()
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: c["name"].as_str().unwrap_or("").into(),
                        type_: c["type"].as_str().unwrap_or("string").into(),
                        format: c["format"].as_str().unwrap_or("").into(),
                        json_path: c["jsonPath"].as_str().unwrap_or("").into(),
                        priority: c["priority"].as_i64().unwrap_or(0),
                        description: c["description"].as_str().unwrap_or("").into(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(ResourceDef {
            group: group.clone(),
            version: v["name"].as_str().unwrap_or("").into(),
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: strs(&names["shortNames"]),
            categories: strs(&names["categories"]),
            status: v.pointer("/subresources/status").is_some(),
            scale,
            generation: true,
            custom: Some(CustomInfo {
                crd_name: name.clone(),
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                printer_columns,
                selectable_fields: v["selectableFields"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|f| f["jsonPath"].as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
            storage_version: v["storage"].as_bool() == Some(true),
        });
    }
    out
}

/// Apply schema `default`s and drop fields the structural schema does not declare (unless
/// `x-kubernetes-preserve-unknown-fields`). `apiVersion`, `kind` and `metadata` are always kept.
/// Returns the dropped field paths (for `fieldValidation=Strict`).
pub fn default_and_prune(schema: Option<&Value>, obj: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    let Some(schema) = schema else { return pruned };
    let Some(root) = obj.as_object_mut() else {
        return pruned;
    };
    let keep: Map<String, Value> = ["apiVersion", "kind", "metadata"]
        .iter()
        .filter_map(|k| root.remove(*k).map(|v| (k.to_string(), v)))
        .collect();
    let mut rest = Value::Object(std::mem::take(root));
    walk(schema, &mut rest, true, "", &mut pruned);
    let mut m = keep;
    if let Value::Object(r) = rest {
        m.extend(r);
    }
    *obj = Value::Object(m);
    pruned
}

fn walk(schema: &Value, v: &mut Value, is_root: bool, path: &str, pruned: &mut Vec<String>) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
    match v {
        Value::Object(m) => {
            let props = schema["properties"].as_object();
            if let Some(props) = props {
                for (k, ps) in props {
                    if !m.contains_key(k)
                        && let Some(d) = ps.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let sub = props.and_then(|p| p.get(&k)).or(additional);
                match sub {
                    Some(sub) => {
                        if let Some(child) = m.get_mut(&k) {
                            let p = if path.is_empty() {
                                k.clone()
                            } else {
                                format!("{path}.{k}")
                            };
                            walk(sub, child, false, &p, pruned);
                        }
                    }
                    None => {
                        let additional_true = schema.get("additionalProperties") == Some(&Value::Bool(true));
                        if !preserve
                            && !additional_true
                            && (props.is_some() || is_root || schema["type"] == "object")
                        {
                            m.remove(&k);
                            pruned.push(if path.is_empty() {
                                k.clone()
                            } else {
                                format!("{path}.{k}")
                            });
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, it) in items.iter_mut().enumerate() {
                    walk(item_schema, it, false, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// Validate a custom object against its structural schema (types, required fields, enums, simple
/// bounds), producing the causes the real server reports as 422 Invalid.
pub fn validate(schema: Option<&Value>, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(schema) = schema else { return causes };
    let Some(m) = obj.as_object() else { return causes };
    let props = schema["properties"].as_object();
    for (k, v) in m {
        if ["apiVersion", "kind", "metadata"].contains(&k.as_str()) {
            continue;
        }
        if let Some(ps) = props.and_then(|p| p.get(k)) {
            check(ps, v, k, &mut causes);
        }
    }
    required(schema, m, "", &mut causes);
    causes
}

fn required(schema: &Value, m: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    for r in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str())
    {
        if !m.contains_key(r) {
            let p = if path.is_empty() {
                r.to_string()
            } else {
                format!("{path}.{r}")
            };
            causes.push(Cause::required(&p, ""));
        }
    }
}

fn type_name(v: &Value) -> &'static str {
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

fn check(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() {
        if schema["nullable"].as_bool() != Some(true) && schema.get("type").is_some() {
            causes.push(Cause::invalid(
                path,
                v,
                &format!(
                    "{path} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or("object")
                ),
            ));
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        if !(v.is_string() || type_name(v) == "integer") {
            causes.push(Cause::invalid(
                path,
                v,
                &format!("{path} in body must be of type int-or-string"),
            ));
        }
        return;
    }
    if let Some(t) = schema["type"].as_str() {
        let actual = type_name(v);
        let ok = actual == t || (t == "number" && actual == "integer");
        if !ok {
            // The real server shows the offending type as the "value" here.
            causes.push(Cause::invalid(
                path,
                &Value::from(actual),
                &format!("{path} in body must be of type {t}: \"{actual}\""),
            ));
            return;
        }
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(v)
    {
        let supported: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            field: path.into(),
            message: format!(
                "Unsupported value: {v}: supported values: {}",
                supported.join(", ")
            ),
        });
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema["minimum"].as_f64().filter(|min| n < *min) {
            causes.push(Cause::invalid(
                path,
                v,
                &format!("{path} in body should be greater than or equal to {min}"),
            ));
        }
        if let Some(max) = schema["maximum"].as_f64().filter(|max| n > *max) {
            causes.push(Cause::invalid(
                path,
                v,
                &format!("{path} in body should be less than or equal to {max}"),
            ));
        }
    }
    match v {
        Value::Object(m) => {
            let props = schema["properties"].as_object();
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in m {
                if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                    check(cs, child, &format!("{path}.{k}"), causes);
                }
            }
            required(schema, m, path, causes);
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                for (i, it) in items.iter().enumerate() {
                    check(is, it, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}
