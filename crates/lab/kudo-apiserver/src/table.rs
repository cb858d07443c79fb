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

fn or_none(v: &str) -> &str {
    if v.is_empty() { "<none>" } else { v }
}

fn or_unset(v: &str) -> &str {
    if v.is_empty() { "<unset>" } else { v }
}

fn selector_text(m: Option<&Value>) -> String {
    match m.and_then(|v| v.as_object()) {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".into(),
    }
}

/// kubectl's short access-mode names (RWO, ROX, RWX, RWOP).
fn access_modes(v: Option<&Value>) -> String {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|m| m.as_str())
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The STATUS column of `kubectl get pods`: a container's waiting/terminated reason wins over the phase.
fn pod_status(o: &Value) -> String {
    let mut reason = s(o, "/status/reason").to_string();
    if reason.is_empty() {
        reason = s(o, "/status/phase").to_string();
    }
    let statuses = |p: &str| {
        o.pointer(p)
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default()
    };
    let mut init_pending = false;
    for (i, c) in statuses("/status/initContainerStatuses").iter().enumerate() {
        let term = &c["state"]["terminated"];
        if term.is_object() && term["exitCode"].as_i64() == Some(0) {
            continue;
        }
        init_pending = true;
        let total = len(o, "/spec/initContainers");
        reason = if term.is_object() {
            match term["reason"].as_str() {
                Some(r) if !r.is_empty() => format!("Init:{r}"),
                _ => format!("Init:ExitCode:{}", term["exitCode"].as_i64().unwrap_or(0)),
            }
        } else {
            match c["state"]["waiting"]["reason"].as_str() {
                Some(r) if !r.is_empty() && r != "PodInitializing" => format!("Init:{r}"),
                _ => format!("Init:{i}/{total}"),
            }
        };
        break;
    }
    if !init_pending {
        let mut running = false;
        for c in statuses("/status/containerStatuses").iter().rev() {
            let st = &c["state"];
            if let Some(r) = st["waiting"]["reason"].as_str().filter(|r| !r.is_empty()) {
                reason = r.to_string();
            } else if st["terminated"].is_object() {
                reason = match st["terminated"]["reason"].as_str() {
                    Some(r) if !r.is_empty() => r.to_string(),
                    _ => format!("ExitCode:{}", st["terminated"]["exitCode"].as_i64().unwrap_or(0)),
                };
            } else if st["running"].is_object() && c["ready"].as_bool() == Some(true) {
                running = true;
            }
        }
        if reason == "Completed" && running {
            reason = "Running".into();
        }
    }
    if meta::is_deleting(o) {
        reason = "Terminating".into();
    }
    reason
}

fn condition_true(o: &Value, kind: &str) -> bool {
    o.pointer("/status/conditions")
        .and_then(|v| v.as_array())
        .is_some_and(|a| {
            a.iter()
                .any(|c| c["type"].as_str() == Some(kind) && c["status"].as_str() == Some("True"))
        })
}

/// The STATUS column of `kubectl get jobs` (kubectl ≥ 1.28).
fn job_status(o: &Value) -> &'static str {
    if condition_true(o, "Failed") {
        "Failed"
    } else if condition_true(o, "Complete") {
        "Complete"
    } else if condition_true(o, "Suspended") {
        "Suspended"
    } else if condition_true(o, "FailureTarget") {
        "FailureTarget"
    } else if condition_true(o, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if meta::is_deleting(o) {
        "Terminating"
    } else {
        "Running"
    }
}

fn job_duration(o: &Value) -> String {
    let start = s(o, "/status/startTime");
    if start.is_empty() {
        return String::new();
    }
    let from = meta::age_secs(start);
    let to = match o.pointer("/status/completionTime").and_then(|v| v.as_str()) {
        Some(t) => meta::age_secs(t),
        None => 0,
    };
    meta::human_duration(from.saturating_sub(to))
}

fn node_status(o: &Value) -> String {
    let ready = o
        .pointer("/status/conditions")
        .and_then(|v| v.as_array())
        .and_then(|a| a.iter().find(|c| c["type"].as_str() == Some("Ready")))
        .map(|c| c["status"].as_str() == Some("True"));
    let mut st = match ready {
        Some(true) => "Ready".to_string(),
        Some(false) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o.pointer("/spec/unschedulable").and_then(|v| v.as_bool()) == Some(true) {
        st.push_str(",SchedulingDisabled");
    }
    st
}

fn node_roles(o: &Value) -> String {
    let mut roles: Vec<String> = meta::labels(o)
        .keys()
        .filter_map(|k| {
            k.strip_prefix("node-role.kubernetes.io/")
                .map(String::from)
                .or_else(|| {
                    (k == "kubernetes.io/role").then(|| meta::labels(o)[k].as_str().unwrap_or("").to_string())
                })
        })
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort();
    roles.dedup();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

fn service_external_ip(o: &Value) -> String {
    let external: Vec<String> = o
        .pointer("/spec/externalIPs")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    match s(o, "/spec/type") {
        "ExternalName" => s(o, "/spec/externalName").to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<String> = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()).map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        _ if !external.is_empty() => external.join(","),
        _ => "<none>".into(),
    }
}

/// Up to three entries joined by commas, then `+ N more...`; `<unset>` when empty (kubectl's
/// rendering of EndpointSlice ports and addresses).
fn first_three(items: Vec<String>) -> String {
    match items.len() {
        0 => "<unset>".into(),
        n if n > 3 => format!("{} + {} more...", items[..3].join(","), n - 3),
        _ => items.join(","),
    }
}

/// EndpointSlice `PORTS`: port numbers (a name when the number is missing, `*` for neither).
fn slice_ports(o: &Value) -> String {
    let ports = o.get("ports").and_then(|v| v.as_array());
    first_three(
        ports
            .into_iter()
            .flatten()
            .map(
                |p| match (p.get("port").and_then(|v| v.as_i64()), p["name"].as_str()) {
                    (Some(n), _) => n.to_string(),
                    (None, Some(name)) => name.to_string(),
                    (None, None) => "*".into(),
                },
            )
            .collect(),
    )
}

/// EndpointSlice `ENDPOINTS`: every address of every endpoint.
fn slice_endpoints(o: &Value) -> String {
    let eps = o.get("endpoints").and_then(|v| v.as_array());
    first_three(
        eps.into_iter()
            .flatten()
            .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
            .filter_map(|a| a.as_str().map(String::from))
            .collect(),
    )
}

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
            c("Status", "string", Box::new(|o| json!(pod_status(o)))),
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
            c(
                "External-IP",
                "string",
                Box::new(|o| json!(service_external_ip(o))),
            ),
            c(
                "Port(s)",
                "string",
                Box::new(|o| {
                    let ports: Vec<String> = o
                        .pointer("/spec/ports")
                        .and_then(|v| v.as_array())
                        .map(|a| {
                            a.iter()
                                .map(|p| {
                                    let proto = p["protocol"].as_str().unwrap_or("TCP");
                                    match p["nodePort"].as_i64() {
                                        Some(np) if np > 0 => format!("{}:{np}/{proto}", p["port"]),
                                        _ => format!("{}/{proto}", p["port"]),
                                    }
                                })
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
        ("apps", "statefulsets") => vec![c(
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
        ("apps", "replicasets") => vec![
            c("Desired", "integer", Box::new(|o| json!(n(o, "/spec/replicas")))),
            c(
                "Current",
                "integer",
                Box::new(|o| json!(n(o, "/status/replicas"))),
            ),
            c(
                "Ready",
                "integer",
                Box::new(|o| json!(n(o, "/status/readyReplicas"))),
            ),
        ],
        ("apps", "daemonsets") => vec![
            c(
                "Desired",
                "integer",
                Box::new(|o| json!(n(o, "/status/desiredNumberScheduled"))),
            ),
            c(
                "Current",
                "integer",
                Box::new(|o| json!(n(o, "/status/currentNumberScheduled"))),
            ),
            c(
                "Ready",
                "integer",
                Box::new(|o| json!(n(o, "/status/numberReady"))),
            ),
            c(
                "Up-to-date",
                "integer",
                Box::new(|o| json!(n(o, "/status/updatedNumberScheduled"))),
            ),
            c(
                "Available",
                "integer",
                Box::new(|o| json!(n(o, "/status/numberAvailable"))),
            ),
            c(
                "Node Selector",
                "string",
                Box::new(|o| json!(selector_text(o.pointer("/spec/template/spec/nodeSelector")))),
            ),
        ],
        ("batch", "jobs") => vec![
            c("Status", "string", Box::new(|o| json!(job_status(o)))),
            c(
                "Completions",
                "string",
                Box::new(|o| {
                    json!(format!(
                        "{}/{}",
                        n(o, "/status/succeeded"),
                        n(o, "/spec/completions")
                    ))
                }),
            ),
            c("Duration", "string", Box::new(|o| json!(job_duration(o)))),
        ],
        ("batch", "cronjobs") => vec![
            c("Schedule", "string", Box::new(|o| json!(s(o, "/spec/schedule")))),
            c(
                "Timezone",
                "string",
                Box::new(|o| json!(or_none(s(o, "/spec/timeZone")))),
            ),
            c(
                "Suspend",
                "boolean",
                Box::new(|o| {
                    json!(
                        o.pointer("/spec/suspend")
                            .and_then(|v| v.as_bool())
                            .unwrap_or(false)
                    )
                }),
            ),
            c("Active", "integer", Box::new(|o| json!(len(o, "/status/active")))),
            c(
                "Last Schedule",
                "string",
                Box::new(
                    |o| match o.pointer("/status/lastScheduleTime").and_then(|v| v.as_str()) {
                        Some(t) => json!(meta::human_duration(meta::age_secs(t))),
                        None => json!("<none>"),
                    },
                ),
            ),
        ],
        ("", "persistentvolumeclaims") => vec![
            c("Status", "string", Box::new(|o| json!(s(o, "/status/phase")))),
            c("Volume", "string", Box::new(|o| json!(s(o, "/spec/volumeName")))),
            c(
                "Capacity",
                "string",
                Box::new(|o| json!(s(o, "/status/capacity/storage"))),
            ),
            c(
                "Access Modes",
                "string",
                Box::new(|o| json!(access_modes(o.pointer("/status/accessModes")))),
            ),
            c(
                "StorageClass",
                "string",
                Box::new(|o| json!(or_unset(s(o, "/spec/storageClassName")))),
            ),
            c(
                "VolumeAttributesClass",
                "string",
                Box::new(|o| json!(or_unset(s(o, "/spec/volumeAttributesClassName")))),
            ),
        ],
        ("", "persistentvolumes") => vec![
            c(
                "Capacity",
                "string",
                Box::new(|o| json!(s(o, "/spec/capacity/storage"))),
            ),
            c(
                "Access Modes",
                "string",
                Box::new(|o| json!(access_modes(o.pointer("/spec/accessModes")))),
            ),
            c(
                "Reclaim Policy",
                "string",
                Box::new(|o| json!(s(o, "/spec/persistentVolumeReclaimPolicy"))),
            ),
            c("Status", "string", Box::new(|o| json!(s(o, "/status/phase")))),
            c(
                "Claim",
                "string",
                Box::new(|o| {
                    let (ns, name) = (s(o, "/spec/claimRef/namespace"), s(o, "/spec/claimRef/name"));
                    json!(if name.is_empty() {
                        String::new()
                    } else {
                        format!("{ns}/{name}")
                    })
                }),
            ),
            c(
                "StorageClass",
                "string",
                Box::new(|o| json!(s(o, "/spec/storageClassName"))),
            ),
            c(
                "VolumeAttributesClass",
                "string",
                Box::new(|o| json!(or_unset(s(o, "/spec/volumeAttributesClassName")))),
            ),
            c("Reason", "string", Box::new(|o| json!(s(o, "/status/reason")))),
        ],
        ("discovery.k8s.io", "endpointslices") => vec![
            c("AddressType", "string", Box::new(|o| json!(s(o, "/addressType")))),
            c("Ports", "string", Box::new(|o| json!(slice_ports(o)))),
            c("Endpoints", "string", Box::new(|o| json!(slice_endpoints(o)))),
        ],
        ("", "serviceaccounts") => vec![c("Secrets", "string", Box::new(|o| json!(len(o, "/secrets"))))],
        ("", "endpoints") => vec![c("Endpoints", "string", Box::new(|o| json!(endpoints_text(o))))],
        ("apps", "controllerrevisions") => vec![
            c(
                "Controller",
                "string",
                Box::new(|o| json!(revision_controller(o))),
            ),
            c("Revision", "string", Box::new(|o| json!(n(o, "/revision")))),
        ],
        ("", "nodes") => vec![
            c("Status", "string", Box::new(|o| json!(node_status(o)))),
            c("Roles", "string", Box::new(|o| json!(node_roles(o)))),
        ],
        _ => Vec::new(),
    }
}

/// A CRD printer column's cell: the first value its JSONPath selects, converted to the column's
/// type as kube-apiserver's table convertor does (a value of the wrong type leaves the cell empty).
fn printer_cell(pc: &PrinterColumn, o: &Value) -> Value {
    let Some(v) = crate::jsonpath::find(o, &pc.json_path).into_iter().next() else {
        return Value::Null;
    };
    match (pc.type_.as_str(), v) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(t)) => json!(t),
        ("string", other) => json!(other.to_string()),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => v.clone(),
        ("date", Value::String(ts)) => json!(meta::human_duration(meta::age_secs(ts))),
        ("integer" | "number" | "boolean" | "date", _) => Value::Null,
        _ => v.clone(),
    }
}

/// `<unknown>` for a missing timestamp, else its age (the events printer's `translateTimestampSince`).
fn since(ts: &str) -> String {
    if ts.is_empty() {
        "<unknown>".into()
    } else {
        meta::human_duration(meta::age_secs(ts))
    }
}

/// kubectl's event row cells after NAME's removal: last seen, type, reason, object, subobject,
/// source, message, first seen, count.
fn event_cells(o: &Value) -> Vec<Value> {
    let first = match s(o, "/firstTimestamp") {
        "" => since(s(o, "/eventTime")),
        t => since(t),
    };
    let mut last = match s(o, "/lastTimestamp") {
        "" => first.clone(),
        t => since(t),
    };
    let mut count = n(o, "/count");
    if o.get("series").is_some_and(|v| v.is_object()) {
        last = since(s(o, "/series/lastObservedTime"));
        count = n(o, "/series/count");
    } else if count == 0 {
        count = 1;
    }
    let kind = s(o, "/involvedObject/kind").to_lowercase();
    let target = match s(o, "/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_non_empty(s(o, "/source/component"), s(o, "/reportingComponent"));
    let instance = first_non_empty(s(o, "/source/host"), s(o, "/reportingInstance"));
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(s(o, "/type")),
        json!(s(o, "/reason")),
        json!(target),
        json!(s(o, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(o, "/message").trim()),
        json!(first),
        json!(count),
    ]
}

/// The ENDPOINTS column of `kubectl get endpoints`: `ip:port` per address and port, at most
/// three, then `+ N more...`; `<none>` without subsets.
fn endpoints_text(o: &Value) -> String {
    let Some(subsets) = o
        .get("subsets")
        .and_then(|v| v.as_array())
        .filter(|a| !a.is_empty())
    else {
        return "<none>".into();
    };
    const MAX: usize = 3;
    let (mut list, mut count, mut more) = (Vec::new(), 0usize, false);
    for ss in subsets {
        let addrs: Vec<&str> = ss["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["ip"].as_str())
            .collect();
        let ports = ss["ports"].as_array().cloned().unwrap_or_default();
        if ports.is_empty() {
            count += addrs.len();
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(a.to_string());
            }
            continue;
        }
        for p in &ports {
            count += addrs.len();
            for a in &addrs {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let host = if a.contains(':') {
                    format!("[{a}]")
                } else {
                    a.to_string()
                };
                list.push(format!("{host}:{}", p["port"].as_i64().unwrap_or(0)));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

/// The CONTROLLER column of `kubectl get controllerrevisions`: `kind.group/name` of the
/// controlling owner, `<none>` without one.
fn revision_controller(o: &Value) -> String {
    let owner = meta::owner_refs(o)
        .iter()
        .find(|r| r["controller"].as_bool() == Some(true));
    let Some(r) = owner else {
        return "<none>".into();
    };
    let kind = r["kind"].as_str().unwrap_or("").to_lowercase();
    let group = r["apiVersion"]
        .as_str()
        .and_then(|av| av.rsplit_once('/').map(|(g, _)| g))
        .unwrap_or("");
    let name = r["name"].as_str().unwrap_or("");
    if group.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{kind}.{group}/{name}")
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
        // kube-apiserver's event printer: NAME comes last, with the wide-only columns at priority 1.
        None if def.group.is_empty() && def.plural == "events" => {
            columns.clear();
            for (name, priority) in [
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
            ] {
                columns.push(col(name, "string", "", priority, name));
            }
            columns.push(col(
                "Name",
                "string",
                "name",
                1,
                "Name must be unique within a namespace.",
            ));
            for o in items {
                let mut cells = event_cells(o);
                cells.push(json!(meta::name(o)));
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
            let is_node = def.group.is_empty() && def.plural == "nodes";
            if is_node {
                columns.push(col("Version", "string", "", 0, "Kubelet Version"));
            }
            for o in items {
                let mut cells = vec![json!(meta::name(o))];
                cells.extend(extra.iter().map(|(_, f)| f(o)));
                cells.push(age(o));
                if is_node {
                    cells.push(json!(s(o, "/status/nodeInfo/kubeletVersion")));
                }
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
