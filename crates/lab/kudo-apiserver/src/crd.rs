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
    causes.extend(schema_causes(&versions));
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

/// What kube-apiserver refuses in a CRD's schemas and would otherwise surface only when objects
/// are written: `pattern`s and CEL rules that do not compile, `oldSelf` where no old value can be
/// correlated (kudo-schema's `check_schema` finds these), `uniqueItems: true` and properties or
/// items without a `type` (the structural-schema rules). kube reports the schema as
/// `spec.validation.openAPIV3Schema` when every version has the same one.
fn schema_causes(versions: &[Value]) -> Vec<Cause> {
    let schemas: Vec<&Value> = versions
        .iter()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect();
    if schemas.is_empty() {
        return Vec::new();
    }
    if schemas.iter().all(|s| *s == schemas[0]) {
        return schema_node_causes(schemas[0], "spec.validation.openAPIV3Schema");
    }
    let mut causes = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            let root = format!("spec.versions[{i}].schema.openAPIV3Schema");
            causes.extend(schema_node_causes(schema, &root));
        }
    }
    causes
}

fn schema_node_causes(schema: &Value, root: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    structural(schema, root, &mut causes);
    for e in kudo_schema::check_schema(schema) {
        let at = kube_schema_path(root, &e.path);
        match e.keyword.as_str() {
            "pattern" => causes.push(Cause::invalid(
                &format!("{at}.pattern"),
                &schema_at(schema, &e.path)["pattern"],
                &format!("must be a valid regular expression, but isn't: {}", e.message),
            )),
            "rule" => causes.push(rule_cause(schema, &e, &at)),
            _ => {}
        }
    }
    causes
}

/// A CEL rule that does not compile, or uses `oldSelf` where it cannot.
fn rule_cause(schema: &Value, e: &kudo_schema::SchemaError, at: &str) -> Cause {
    let rule = &schema_at(schema, &e.path)["rule"];
    if e.message.contains("oldSelf") {
        let list = at.rfind(".items").map_or(at, |i| &at[..i]);
        let list = list.split(".x-kubernetes-validations").next().unwrap_or(list);
        return Cause::invalid(
            &format!("{at}.rule"),
            rule,
            &format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"),
        );
    }
    let message = schema_at(schema, &e.path)["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let shown = format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\"}}",
        kudo_api::strconv::go_quote(rule.as_str().unwrap_or("")),
        kudo_api::strconv::go_quote(&message),
    );
    Cause {
        reason: "FieldValueInvalid".into(),
        field: format!("{at}.rule"),
        message: format!("Invalid value: {shown}: compilation failed: {}", e.message),
    }
}

/// kudo-schema's dotted schema path (`properties.spec.x-kubernetes-validations[0]`) as kube
/// writes it (`<root>.properties[spec].x-kubernetes-validations[0]`).
fn kube_schema_path(root: &str, path: &str) -> String {
    let mut out = root.to_string();
    let mut segs = path.split('.').filter(|s| !s.is_empty());
    while let Some(seg) = segs.next() {
        match seg {
            "properties" => out.push_str(&format!(".properties[{}]", segs.next().unwrap_or(""))),
            other => out.push_str(&format!(".{other}")),
        }
    }
    out
}

/// The schema node (or rule) at a kudo-schema path.
fn schema_at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    let mut cur = schema;
    let mut segs = path.split('.').filter(|s| !s.is_empty());
    while let Some(seg) = segs.next() {
        cur = match seg {
            "properties" => &cur["properties"][segs.next().unwrap_or("")],
            s if s.starts_with("x-kubernetes-validations[") => {
                let i = s
                    .trim_start_matches("x-kubernetes-validations[")
                    .trim_end_matches(']');
                &cur["x-kubernetes-validations"][i.parse::<usize>().unwrap_or(usize::MAX)]
            }
            other => &cur[other],
        };
    }
    cur
}

/// The structural-schema rules that matter here: no `uniqueItems: true`, a `type` on every
/// property and item (unless int-or-string or preserving unknown fields).
fn structural(schema: &Value, at: &str, causes: &mut Vec<Cause>) {
    if schema["uniqueItems"].as_bool() == Some(true) {
        causes.push(Cause::forbidden(
            &format!("{at}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, ps) in props {
            let here = format!("{at}.properties[{k}]");
            untyped(ps, &here, "must not be empty for specified object fields", causes);
            structural(ps, &here, causes);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        let here = format!("{at}.items");
        untyped(
            items,
            &here,
            "must not be empty for specified array items",
            causes,
        );
        structural(items, &here, causes);
    }
    if let Some(a) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        structural(a, &format!("{at}.additionalProperties"), causes);
    }
}

fn untyped(schema: &Value, at: &str, detail: &str, causes: &mut Vec<Cause>) {
    let exempt = schema["x-kubernetes-int-or-string"].as_bool() == Some(true)
        || schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
    if schema.get("type").is_none() && !exempt {
        causes.push(Cause::required(&format!("{at}.type"), detail));
    }
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
    whole_numbers(&mut rest);
    let mut m = keep;
    if let Value::Object(r) = rest {
        m.extend(r);
    }
    *obj = Value::Object(m);
    pruned
}

/// Numbers without a fraction written as floats (`2.0`) become integers, as kube-apiserver stores
/// them (it decodes them to a float64 and encodes that as `2`).
fn whole_numbers(v: &mut Value) {
    match v {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(m) => m.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

fn walk(schema: &Value, v: &mut Value, is_root: bool, path: &str, pruned: &mut Vec<String>) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
    match v {
        Value::Object(m) => {
            let props = schema["properties"].as_object();
            if let Some(props) = props {
                for (k, ps) in props {
                    // As kube-apiserver: a null where null is not allowed counts as absent, so
                    // it is defaulted or else pruned.
                    let null = m.get(k).is_some_and(Value::is_null) && ps["nullable"].as_bool() != Some(true);
                    if null {
                        m.remove(k);
                        if ps.get("default").is_none() {
                            pruned.push(if path.is_empty() {
                                k.clone()
                            } else {
                                format!("{path}.{k}")
                            });
                        }
                    }
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

/// Validate a custom object against its structural schema with kudo-schema, the one validator of
/// (types, bounds, lengths, patterns, formats kube checks, CEL `x-kubernetes-validations`),
/// producing the causes kube-apiserver reports in a 422 Invalid. `old` is the stored object of an
/// update or patch: transition rules (`oldSelf`) are evaluated against it, and only then.
/// `apiVersion`, `kind` and `metadata` are not the schema's business (the server checks them).
pub fn validate(schema: Option<&Value>, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let Some(schema) = schema else {
        return Vec::new();
    };
    let body = without_meta(obj);
    let old_body = old.map(without_meta);
    kudo_schema::validate(schema, &body, old_body.as_ref(), "", kudo_schema::Formats::Kube)
        .iter()
        .map(|v| {
            let c = v.kube_cause();
            Cause {
                reason: c.reason,
                field: c.field,
                message: c.message,
            }
        })
        .collect()
}

/// The object without `apiVersion`, `kind` and `metadata`.
fn without_meta(obj: &Value) -> Value {
    let mut body = obj.clone();
    if let Some(m) = body.as_object_mut() {
        for k in ["apiVersion", "kind", "metadata"] {
            m.remove(k);
        }
    }
    body
}
