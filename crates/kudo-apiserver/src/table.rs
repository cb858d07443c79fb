//! `meta.k8s.io/v1 Table` output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which is how
//! kubectl shows server-defined columns such as a CRD's `additionalPrinterColumns`.

use serde_json::{Value, json};

use crate::meta;
use crate::registry::{PrinterColumn, ResourceDef};

fn col(name: &str, type_: &str, format: &str, priority: i64, description: &str) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(|v| v.as_str()).unwrap_or("")
}
fn n(o: &Value, p: &str) -> i64 {
    o.pointer(p).and_then(|v| v.as_i64()).unwrap_or(0)
}
fn len(o: &Value, p: &str) -> usize {
    match o.pointer(p) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

type Cell = Box<dyn Fn(&Value) -> Value>;

fn builtin_columns(def: &ResourceDef) -> Vec<(Value, Cell)> {
    let c = |name: &str, t: &str, f: Cell| (col(name, t, "", 0, name), f);
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => vec![c("Status", "string", Box::new(|o| json!(s(o, "/status/phase"))))],
        ("", "configmaps") => vec![c(
            "Data",
            "integer",
            Box::new(|o| json!(len(o, "/data") + len(o, "/binaryData"))),
        )],
        ("", "secrets") => vec![
            c("Type", "string", Box::new(|o| json!(s(o, "/type")))),
            c("Data", "integer", Box::new(|o| json!(len(o, "/data")))),
        ],
        ("", "pods") => vec![
            c(
                "Ready",
                "string",
                Box::new(|o| {
                    let total = len(o, "/spec/containers");
                    let ready = o
                        .pointer("/status/containerStatuses")
                        .and_then(|v| v.as_array())
                        .map(|a| a.iter().filter(|c| c["ready"].as_bool() == Some(true)).count())
                        .unwrap_or(0);
                    json!(format!("{ready}/{total}"))
                }),
            ),
            c(
                "Status",
                "string",
                Box::new(|o| {
                    if meta::is_deleting(o) {
                        json!("Terminating")
                    } else {
                        json!(s(o, "/status/phase"))
                    }
                }),
            ),
            c(
                "Restarts",
                "string",
                Box::new(|o| {
                    let r: i64 = o
                        .pointer("/status/containerStatuses")
                        .and_then(|v| v.as_array())
                        .map(|a| a.iter().map(|c| c["restartCount"].as_i64().unwrap_or(0)).sum())
                        .unwrap_or(0);
                    json!(r.to_string())
                }),
            ),
        ],
        ("", "services") => vec![
            c("Type", "string", Box::new(|o| json!(s(o, "/spec/type")))),
            c(
                "Cluster-IP",
                "string",
                Box::new(|o| json!(s(o, "/spec/clusterIP"))),
            ),
            c("External-IP", "string", Box::new(|_| json!("<none>"))),
            c(
                "Port(s)",
                "string",
                Box::new(|o| {
                    let ports: Vec<String> = o
                        .pointer("/spec/ports")
                        .and_then(|v| v.as_array())
                        .map(|a| {
                            a.iter()
                                .map(|p| format!("{}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP")))
                                .collect()
                        })
                        .unwrap_or_default();
                    json!(if ports.is_empty() {
                        "<none>".to_string()
                    } else {
                        ports.join(",")
                    })
                }),
            ),
        ],
        ("apps", "deployments") => vec![
            c(
                "Ready",
                "string",
                Box::new(|o| {
                    json!(format!(
                        "{}/{}",
                        n(o, "/status/readyReplicas"),
                        n(o, "/spec/replicas")
                    ))
                }),
            ),
            c(
                "Up-to-date",
                "integer",
                Box::new(|o| json!(n(o, "/status/updatedReplicas"))),
            ),
            c(
                "Available",
                "integer",
                Box::new(|o| json!(n(o, "/status/availableReplicas"))),
            ),
        ],
        ("apps", "statefulsets") | ("apps", "replicasets") => vec![c(
            "Ready",
            "string",
            Box::new(|o| {
                json!(format!(
                    "{}/{}",
                    n(o, "/status/readyReplicas"),
                    n(o, "/spec/replicas")
                ))
            }),
        )],
        ("batch", "jobs") => vec![c(
            "Completions",
            "string",
            Box::new(|o| {
                json!(format!(
                    "{}/{}",
                    n(o, "/status/succeeded"),
                    n(o, "/spec/completions")
                ))
            }),
        )],
        ("", "persistentvolumeclaims") => {
            vec![c("Status", "string", Box::new(|o| json!(s(o, "/status/phase"))))]
        }
        _ => Vec::new(),
    }
}

fn printer_cell(pc: &PrinterColumn, o: &Value) -> Value {
    match meta::json_path(o, &pc.json_path) {
        None | Some(Value::Null) => Value::Null,
        Some(v) if pc.type_ == "date" => match v.as_str() {
            Some(ts) => json!(meta::human_duration(meta::age_secs(ts))),
            None => v.clone(),
        },
        Some(v) => v.clone(),
    }
}

/// Build a Table for `items`. `include` is the `includeObject` parameter (`None`, `Metadata` default,
/// `Object`).
pub fn to_table(def: &ResourceDef, items: &[Value], list_meta: Value, include: &str) -> Value {
    let mut columns = vec![col(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    )];
    let mut rows = Vec::with_capacity(items.len());
    let age = |o: &Value| {
        json!(meta::human_duration(meta::age_secs(meta::meta_str(
            o,
            "creationTimestamp"
        ))))
    };
    match &def.custom {
        Some(c) if !c.printer_columns.is_empty() => {
            for pc in &c.printer_columns {
                columns.push(col(&pc.name, &pc.type_, &pc.format, pc.priority, &pc.description));
            }
            for o in items {
                let mut cells = vec![json!(meta::name(o))];
                cells.extend(c.printer_columns.iter().map(|pc| printer_cell(pc, o)));
                rows.push(row(cells, o, include));
            }
        }
        // Like kube-apiserver's default table for kinds without a printer: the timestamp itself.
        None if def.group == "apiextensions.k8s.io" => {
            columns.push(col("Created At", "date", "", 0, "CreationTimestamp"));
            for o in items {
                let cells = vec![
                    json!(meta::name(o)),
                    json!(meta::meta_str(o, "creationTimestamp")),
                ];
                rows.push(row(cells, o, include));
            }
        }
        _ => {
            let extra = builtin_columns(def);
            for (c, _) in &extra {
                columns.push(c.clone());
            }
            columns.push(col("Age", "string", "", 0, "CreationTimestamp"));
            for o in items {
                let mut cells = vec![json!(meta::name(o))];
                cells.extend(extra.iter().map(|(_, f)| f(o)));
                cells.push(age(o));
                rows.push(row(cells, o, include));
            }
        }
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

fn row(cells: Vec<Value>, o: &Value, include: &str) -> Value {
    let object = match include {
        "None" => Value::Null,
        "Object" => o.clone(),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
        }),
    };
    json!({"cells": cells, "object": object})
}
