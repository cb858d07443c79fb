//! Per-kind defaulting and validation: the subset of the real server's rules that clients and the KUDO
//! engine observe (name formats, required selectors, immutable fields, ClusterIP allocation).

use serde_json::{Value, json};

use crate::error::Cause;
use crate::meta;
use crate::registry::ResourceDef;

fn is(def: &ResourceDef, group: &str, plural: &str) -> bool {
    def.group == group && def.plural == plural
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Server-side defaults applied at create time. `cluster_ip` is a freshly allocated address for Services.
pub fn default_object(def: &ResourceDef, obj: &mut Value, cluster_ip: Option<String>) {
    if def.group.is_empty() {
        match def.plural.as_str() {
            "namespaces" => {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
                let name = meta::name(obj).to_string();
                let md = meta::meta_mut(obj);
                let labels = md.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
            "services" => default_service(obj, cluster_ip),
            "secrets" => default_secret(obj),
            "pods" => {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
                default_pod_spec(obj.pointer_mut("/spec"));
            }
            "persistentvolumeclaims" => {
                kudo_patch::quantity::canonicalize_claim_spec(obj.get_mut("spec"));
                obj["status"] = json!({"phase": "Pending"});
            }
            "persistentvolumes" => obj["status"] = json!({"phase": "Available"}),
            _ => {}
        }
    }
    if def.group == "apps" && ["deployments", "statefulsets", "replicasets"].contains(&def.plural.as_str()) {
        if let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut()) {
            spec.entry("replicas").or_insert(json!(1));
            spec.entry("revisionHistoryLimit").or_insert(json!(10));
        }
        if def.plural == "deployments"
            && let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut())
        {
            spec.entry("progressDeadlineSeconds").or_insert(json!(600));
            // kubectl's protobuf bodies carry an empty `strategy: {}`, so fill field by field.
            default_strategy(
                spec,
                "strategy",
                json!({"maxUnavailable": "25%", "maxSurge": "25%"}),
            );
        }
        if def.plural == "statefulsets"
            && let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut())
        {
            spec.entry("podManagementPolicy").or_insert(json!("OrderedReady"));
            default_strategy(spec, "updateStrategy", json!({"partition": 0}));
            spec.entry("persistentVolumeClaimRetentionPolicy")
                .or_insert(json!({"whenDeleted": "Retain", "whenScaled": "Retain"}));
            if let Some(Value::Array(vcts)) = spec.get_mut("volumeClaimTemplates") {
                for vct in vcts.iter_mut() {
                    kudo_patch::quantity::canonicalize_claim_spec(vct.get_mut("spec"));
                }
            }
        }
        default_pod_spec(obj.pointer_mut("/spec/template/spec"));
    }
    if is(def, "apps", "daemonsets") {
        if let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut()) {
            spec.entry("revisionHistoryLimit").or_insert(json!(10));
            default_strategy(
                spec,
                "updateStrategy",
                json!({"maxUnavailable": 1, "maxSurge": 0}),
            );
        }
        default_pod_spec(obj.pointer_mut("/spec/template/spec"));
    }
    if is(def, "batch", "cronjobs") {
        if let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut()) {
            spec.entry("concurrencyPolicy").or_insert(json!("Allow"));
            spec.entry("suspend").or_insert(json!(false));
            spec.entry("successfulJobsHistoryLimit").or_insert(json!(3));
            spec.entry("failedJobsHistoryLimit").or_insert(json!(1));
        }
        default_pod_spec(obj.pointer_mut("/spec/jobTemplate/spec/template/spec"));
    }
    if is(def, "batch", "jobs") {
        let uid = meta::uid(obj).to_string();
        let name = meta::name(obj).to_string();
        if let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut()) {
            spec.entry("parallelism").or_insert(json!(1));
            spec.entry("backoffLimit").or_insert(json!(6));
            spec.entry("completionMode").or_insert(json!("NonIndexed"));
            spec.entry("suspend").or_insert(json!(false));
            if !spec.contains_key("completions") {
                spec.insert("completions".into(), json!(1));
            }
            let manual = spec
                .get("manualSelector")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            if !manual && !spec.contains_key("selector") {
                spec.insert(
                    "selector".into(),
                    json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
                );
                let tmd = spec
                    .entry("template")
                    .or_insert(json!({}))
                    .as_object_mut()
                    .map(|t| t.entry("metadata").or_insert(json!({})));
                if let Some(Value::Object(tmd)) = tmd {
                    let labels = tmd.entry("labels").or_insert(json!({}));
                    if let Some(l) = labels.as_object_mut() {
                        l.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
                        l.insert("controller-uid".into(), json!(uid));
                        l.insert("batch.kubernetes.io/job-name".into(), json!(name));
                        l.insert("job-name".into(), json!(name));
                    }
                }
            }
        }
        default_pod_spec(obj.pointer_mut("/spec/template/spec"));
    }
}

/// Deployment `strategy` / StatefulSet and DaemonSet `updateStrategy`: type RollingUpdate, and for
/// that type the missing `rollingUpdate` parameters from `rolling`.
fn default_strategy(spec: &mut serde_json::Map<String, Value>, field: &str, rolling: Value) {
    let Some(Value::Object(st)) = Some(spec.entry(field).or_insert(json!({}))) else {
        return;
    };
    st.entry("type").or_insert(json!("RollingUpdate"));
    if st.get("type").and_then(|t| t.as_str()) == Some("RollingUpdate") {
        let ru = st.entry("rollingUpdate").or_insert(json!({}));
        if let (Some(ru), Value::Object(defaults)) = (ru.as_object_mut(), rolling) {
            for (k, v) in defaults {
                ru.entry(k).or_insert(v);
            }
        }
    }
}

/// Secrets: `type` defaults to `Opaque`, and write-only `stringData` is folded into `data`.
fn default_secret(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    if m.get("type").and_then(|t| t.as_str()).unwrap_or("").is_empty() {
        m.insert("type".into(), json!("Opaque"));
    }
    if let Some(Value::Object(sd)) = m.remove("stringData") {
        let data = m.entry("data").or_insert(json!({}));
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                d.insert(k, json!(crate::proto::b64(v.as_str().unwrap_or("").as_bytes())));
            }
        }
    }
}

fn default_pod_spec(spec: Option<&mut Value>) {
    let Some(Value::Object(spec)) = spec else { return };
    kudo_patch::quantity::canonicalize_pod_spec(spec);
    spec.entry("restartPolicy").or_insert(json!("Always"));
    spec.entry("terminationGracePeriodSeconds").or_insert(json!(30));
    spec.entry("dnsPolicy").or_insert(json!("ClusterFirst"));
    spec.entry("schedulerName").or_insert(json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut().filter_map(|c| c.as_object_mut()) {
                c.entry("terminationMessagePath")
                    .or_insert(json!("/dev/termination-log"));
                c.entry("terminationMessagePolicy").or_insert(json!("File"));
                let image = c.get("image").and_then(|v| v.as_str()).unwrap_or("").to_string();
                let tag = image.rsplit('/').next().unwrap_or("");
                let policy = if tag.contains(':') && !tag.ends_with(":latest") {
                    "IfNotPresent"
                } else {
                    "Always"
                };
                c.entry("imagePullPolicy").or_insert(json!(policy));
                if let Some(Value::Array(ports)) = c.get_mut("ports") {
                    for p in ports.iter_mut().filter_map(|p| p.as_object_mut()) {
                        p.entry("protocol").or_insert(json!("TCP"));
                    }
                }
            }
        }
    }
}

fn default_service(obj: &mut Value, cluster_ip: Option<String>) {
    let spec = obj.as_object_mut().map(|m| m.entry("spec").or_insert(json!({})));
    let Some(Value::Object(spec)) = spec else { return };
    spec.entry("type").or_insert(json!("ClusterIP"));
    spec.entry("sessionAffinity").or_insert(json!("None"));
    let external_name = spec.get("type").and_then(|v| v.as_str()) == Some("ExternalName");
    if !external_name {
        let current = spec
            .get("clusterIP")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        if current.is_empty()
            && let Some(ip) = cluster_ip
        {
            spec.insert("clusterIP".into(), json!(ip));
        }
        if let Some(ip) = spec.get("clusterIP").cloned() {
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
        spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
        spec.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut().filter_map(|p| p.as_object_mut()) {
            p.entry("protocol").or_insert(json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                p.entry("targetPort").or_insert(port);
            }
        }
    }
}

/// Defaults on update: allocated values carried over from the old object, plus create defaults.
pub fn default_update(def: &ResourceDef, old: &Value, new: &mut Value) {
    if is(def, "", "services") {
        let old_ip = old.pointer("/spec/clusterIP").cloned();
        let new_ip = new
            .pointer("/spec/clusterIP")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        if new_ip.is_empty()
            && let (Some(ip), Some(Value::Object(spec))) = (old_ip, new.get_mut("spec"))
        {
            spec.insert("clusterIP".into(), ip);
        }
        default_service(new, None);
    }
    if is(def, "batch", "jobs") {
        // Generated selector and template labels are server-owned.
        for p in ["selector", "template"] {
            if new.pointer(&format!("/spec/{p}")).is_none()
                && let (Some(v), Some(Value::Object(spec))) =
                    (old.pointer(&format!("/spec/{p}")).cloned(), new.get_mut("spec"))
            {
                spec.insert(p.into(), v);
            }
        }
    }
    if def.group == "apps" || is(def, "batch", "jobs") || is(def, "batch", "cronjobs") {
        default_object(def, new, None);
    }
    if is(def, "", "secrets") {
        default_secret(new);
    }
    if is(def, "", "namespaces")
        && new.get("spec").is_none()
        && let Some(s) = old.get("spec").cloned()
    {
        new["spec"] = s;
    }
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const DNS_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// kube-apiserver's limit on the summed size of an object's annotation keys and values.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// kube-apiserver's limit on the data of a ConfigMap or Secret (`MaxSecretSize`).
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// The causes of a qualified name (label or annotation key) that is not one, as
/// `IsQualifiedName` words them.
fn qualified_name_causes(field: &str, k: &str, causes: &mut Vec<Cause>) {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            causes.push(Cause::invalid(field, &json!(k), "prefix part must be non-empty"));
        } else if !is_dns_subdomain(p) {
            causes.push(Cause::invalid(
                field,
                &json!(k),
                &format!("prefix part {DNS_SUBDOMAIN_MSG}"),
            ));
        }
    }
    if name.is_empty() {
        causes.push(Cause::invalid(field, &json!(k), "name part must be non-empty"));
    } else if name.len() > 63 {
        causes.push(Cause::invalid(
            field,
            &json!(k),
            "name part must be no more than 63 characters",
        ));
    } else if !is_label_value(name) {
        causes.push(Cause::invalid(field, &json!(k), QUALIFIED_NAME_MSG));
    }
}

/// Label keys and values, annotation keys and the annotations' total size, checked on every
/// write as the real server does.
fn validate_labels(obj: &Value, causes: &mut Vec<Cause>) {
    for (k, v) in meta::labels(obj) {
        qualified_name_causes("metadata.labels", &k, causes);
        let value = v.as_str().unwrap_or("");
        if value.len() > 63 {
            causes.push(Cause::invalid(
                "metadata.labels",
                &v,
                "must be no more than 63 characters",
            ));
        } else if !v.is_string() || !is_label_value(value) {
            causes.push(Cause::invalid(
                "metadata.labels",
                &v,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ));
        }
    }
    if let Some(ann) = obj.pointer("/metadata/annotations").and_then(|v| v.as_object()) {
        let mut total = 0usize;
        for (k, v) in ann {
            // The key is checked lower-cased, and reported as written.
            let mut found = Vec::new();
            qualified_name_causes("metadata.annotations", &k.to_lowercase(), &mut found);
            for mut c in found {
                c.message = c
                    .message
                    .replacen(&format!("{:?}", k.to_lowercase()), &format!("{k:?}"), 1);
                causes.push(c);
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > MAX_ANNOTATIONS_BYTES {
            causes.push(Cause::too_long("metadata.annotations", MAX_ANNOTATIONS_BYTES));
        }
    }
}

/// `must be greater than or equal to 0` for a negative integer at `ptr`.
fn non_negative(obj: &Value, ptr: &str, causes: &mut Vec<Cause>) {
    if let Some(n) = obj.pointer(ptr).and_then(|v| v.as_i64())
        && n < 0
    {
        causes.push(Cause::invalid(
            &field_of(ptr),
            &json!(n),
            "must be greater than or equal to 0",
        ));
    }
}

/// `/spec/template/spec` → `spec.template.spec`.
fn field_of(ptr: &str) -> String {
    ptr.trim_start_matches('/').replace('/', ".")
}

/// An IANA service name as `IsValidPortName` checks it (container and service port names).
fn port_name_causes(field: &str, name: &str, causes: &mut Vec<Cause>) {
    let v = json!(name);
    if name.len() > 15 {
        causes.push(Cause::invalid(field, &v, "must be no more than 15 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        causes.push(Cause::invalid(
            field,
            &v,
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
        ));
    }
    if name.contains("--") {
        causes.push(Cause::invalid(field, &v, "must not contain consecutive hyphens"));
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        causes.push(Cause::invalid(
            field,
            &v,
            "must contain at least one letter (a-z)",
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        causes.push(Cause::invalid(field, &v, "must not begin or end with a hyphen"));
    }
}

fn port_number_causes(field: &str, port: Option<&Value>, causes: &mut Vec<Cause>) {
    match port.and_then(|v| v.as_i64()) {
        None | Some(0) => causes.push(Cause::required(field, "")),
        Some(p) if !(1..=65535).contains(&p) => causes.push(Cause::invalid(
            field,
            &json!(p),
            "must be between 1 and 65535, inclusive",
        )),
        Some(_) => {}
    }
}

/// The parts of a pod spec packages write: containers (names, images, ports) and the volumes
/// they name. `ptr` is where the pod spec sits (`/spec`, `/spec/template/spec`, …).
fn validate_pod_spec(obj: &Value, ptr: &str, causes: &mut Vec<Cause>) {
    let base = field_of(ptr);
    let containers = obj
        .pointer(&format!("{ptr}/containers"))
        .and_then(|v| v.as_array());
    if containers.is_none_or(|a| a.is_empty()) {
        causes.push(Cause::required(&format!("{base}.containers"), ""));
    }
    let mut seen: Vec<String> = Vec::new();
    for list in ["initContainers", "containers"] {
        let Some(cs) = obj.pointer(&format!("{ptr}/{list}")).and_then(|v| v.as_array()) else {
            continue;
        };
        for (i, c) in cs.iter().enumerate() {
            let at = format!("{base}.{list}[{i}]");
            let name = c.get("name").and_then(|v| v.as_str()).unwrap_or("");
            if name.is_empty() {
                causes.push(Cause::required(&format!("{at}.name"), ""));
            } else if !is_dns_label(name) {
                causes.push(Cause::invalid(&format!("{at}.name"), &json!(name), DNS_LABEL_MSG));
            } else if seen.iter().any(|s| s == name) {
                causes.push(Cause {
                    reason: "FieldValueDuplicate".into(),
                    field: format!("{at}.name"),
                    message: format!("Duplicate value: {name:?}"),
                });
            } else {
                seen.push(name.to_string());
            }
            if c.get("image").and_then(|v| v.as_str()).unwrap_or("").is_empty() {
                causes.push(Cause::required(&format!("{at}.image"), ""));
            }
            for (j, p) in c
                .get("ports")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .enumerate()
            {
                let pat = format!("{at}.ports[{j}]");
                if let Some(pn) = p.get("name").and_then(|v| v.as_str()).filter(|s| !s.is_empty()) {
                    port_name_causes(&format!("{pat}.name"), pn, causes);
                }
                port_number_causes(&format!("{pat}.containerPort"), p.get("containerPort"), causes);
                if let Some(hp) = p.get("hostPort").and_then(|v| v.as_i64())
                    && hp != 0
                    && !(1..=65535).contains(&hp)
                {
                    causes.push(Cause::invalid(
                        &format!("{pat}.hostPort"),
                        &json!(hp),
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
    }
}

/// Where the pod template's spec sits in objects of this kind, if they have one.
fn pod_spec_ptr(def: &ResourceDef) -> Option<&'static str> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => Some("/spec"),
        ("", "podtemplates") => Some("/template/spec"),
        ("", "replicationcontrollers") => Some("/spec/template/spec"),
        ("apps", "deployments" | "statefulsets" | "replicasets" | "daemonsets") => {
            Some("/spec/template/spec")
        }
        ("batch", "jobs") => Some("/spec/template/spec"),
        ("batch", "cronjobs") => Some("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    }
}

/// Checks shared by create and update (kube-apiserver runs the object's own validation on both).
fn validate_object(def: &ResourceDef, obj: &Value, causes: &mut Vec<Cause>) {
    validate_labels(obj, causes);
    if let Some(ptr) = pod_spec_ptr(def) {
        validate_pod_spec(obj, ptr, causes);
    }
    if def.group == "apps" && ["deployments", "statefulsets", "replicasets"].contains(&def.plural.as_str()) {
        non_negative(obj, "/spec/replicas", causes);
    }
    if is(def, "batch", "jobs") {
        for f in [
            "parallelism",
            "completions",
            "backoffLimit",
            "activeDeadlineSeconds",
        ] {
            non_negative(obj, &format!("/spec/{f}"), causes);
        }
    }
    if def.group == "apps"
        && ["deployments", "statefulsets", "replicasets", "daemonsets"].contains(&def.plural.as_str())
    {
        match obj.pointer("/spec/selector") {
            None | Some(Value::Null) => causes.push(Cause::required("spec.selector", "")),
            Some(sel) => {
                let tl = obj
                    .pointer("/spec/template/metadata/labels")
                    .and_then(|v| v.as_object())
                    .cloned()
                    .unwrap_or_default();
                let ml = sel
                    .get("matchLabels")
                    .and_then(|v| v.as_object())
                    .cloned()
                    .unwrap_or_default();
                if ml.iter().any(|(k, v)| tl.get(k) != Some(v)) {
                    causes.push(Cause::invalid(
                        "spec.template.metadata.labels",
                        &Value::Object(tl),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    if is(def, "", "services") {
        named_ports_causes("spec.ports", obj.pointer("/spec/ports"), causes);
    }
    if is(def, "", "endpoints") {
        for (i, ss) in obj
            .get("subsets")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .enumerate()
        {
            named_ports_causes(&format!("subsets[{i}].ports"), ss.get("ports"), causes);
        }
    }
    if is(def, "", "configmaps") || is(def, "", "secrets") {
        let mut total = 0usize;
        for section in ["data", "binaryData"] {
            for v in obj
                .get(section)
                .and_then(|v| v.as_object())
                .into_iter()
                .flatten()
                .map(|(_, v)| v)
            {
                let text = v.as_str().unwrap_or("");
                total += if section == "binaryData" || is(def, "", "secrets") {
                    // Base64 on the wire; the limit is on the decoded bytes.
                    text.trim_end_matches('=').len() * 3 / 4
                } else {
                    text.len()
                };
            }
        }
        if total > MAX_DATA_BYTES {
            let field = if is(def, "", "secrets") { "data" } else { "[]" };
            causes.push(Cause::too_long(field, MAX_DATA_BYTES));
        }
    }
}

/// Validation of a new object.
/// Service and Endpoints ports: a name (a DNS label) is required once there are several, and the
/// number must be a valid port. `field` is the list's path (`spec.ports`, `subsets[0].ports`).
fn named_ports_causes(field: &str, ports: Option<&Value>, causes: &mut Vec<Cause>) {
    let ports = ports.and_then(|v| v.as_array());
    let several = ports.is_some_and(|p| p.len() > 1);
    for (i, p) in ports.into_iter().flatten().enumerate() {
        let at = format!("{field}[{i}]");
        match p.get("name").and_then(|v| v.as_str()).filter(|s| !s.is_empty()) {
            None if several => causes.push(Cause::required(&format!("{at}.name"), "")),
            None => {}
            Some(n) if !is_dns_label(n) => {
                causes.push(Cause::invalid(&format!("{at}.name"), &json!(n), DNS_LABEL_MSG))
            }
            Some(_) => {}
        }
        port_number_causes(&format!("{at}.port"), p.get("port"), causes);
    }
}

pub fn validate_create(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = meta::name(obj);
    let label_named = def.group.is_empty() && ["namespaces", "services"].contains(&def.plural.as_str());
    if name.is_empty() {
        causes.push(Cause::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if is(def, "", "services") {
        // Service names are DNS-1035 labels: they must start with a letter.
        if !is_dns_label(name) || !name.as_bytes()[0].is_ascii_lowercase() {
            causes.push(Cause::invalid("metadata.name", &json!(name), DNS1035_LABEL_MSG));
        }
    } else if label_named && !is_dns_label(name) {
        causes.push(Cause::invalid("metadata.name", &json!(name), DNS_LABEL_MSG));
    } else if !label_named && def.plural != "events" && !is_dns_subdomain(name) && !name.contains(':') {
        causes.push(Cause::invalid("metadata.name", &json!(name), DNS_SUBDOMAIN_MSG));
    }
    validate_object(def, obj, &mut causes);
    if is(def, "", "configmaps") || is(def, "", "secrets") {
        for section in ["data", "binaryData", "stringData"] {
            if let Some(d) = obj.get(section).and_then(|v| v.as_object()) {
                for k in d.keys() {
                    let ok = !k.is_empty()
                        && k.len() <= 253
                        && k.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                    if !ok {
                        causes.push(Cause::invalid(
                            &format!("{section}[{k}]"),
                            &json!(k),
                            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                        ));
                    }
                }
            }
        }
    }
    causes
}

fn changed(old: &Value, new: &Value, ptr: &str) -> bool {
    old.pointer(ptr) != new.pointer(ptr)
}

/// Validation of an update: immutable fields.
pub fn validate_update(def: &ResourceDef, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_object(def, new, &mut causes);
    if is(def, "", "services") {
        let oi = old
            .pointer("/spec/clusterIP")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let ni = new
            .pointer("/spec/clusterIP")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let external = new.pointer("/spec/type").and_then(|v| v.as_str()) == Some("ExternalName");
        if !oi.is_empty() && oi != ni && !external {
            // Go prints the value as `[]string{"…"}`.
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                field: "spec.clusterIPs[0]".into(),
                message: format!("Invalid value: []string{{{ni:?}}}: may not change once set"),
            });
        }
    }
    if def.group == "apps"
        && ["deployments", "statefulsets", "replicasets", "daemonsets"].contains(&def.plural.as_str())
        && changed(old, new, "/spec/selector")
    {
        causes.push(Cause::invalid(
            "spec.selector",
            new.pointer("/spec/selector").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
    if is(def, "apps", "statefulsets") {
        let allowed = [
            "replicas",
            "ordinals",
            "template",
            "updateStrategy",
            "persistentVolumeClaimRetentionPolicy",
            "minReadySeconds",
        ];
        let strip = |v: &Value| {
            let mut m = v
                .get("spec")
                .and_then(|s| s.as_object())
                .cloned()
                .unwrap_or_default();
            for a in allowed {
                m.remove(a);
            }
            m
        };
        if strip(old) != strip(new) {
            causes.push(Cause::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
    }
    if is(def, "batch", "jobs") {
        if changed(old, new, "/spec/selector") {
            causes.push(Cause::invalid(
                "spec.selector",
                new.pointer("/spec/selector").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        if changed(old, new, "/spec/template") {
            causes.push(Cause::invalid(
                "spec.template",
                new.pointer("/spec/template").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        if changed(old, new, "/spec/completions") {
            causes.push(Cause::invalid(
                "spec.completions",
                new.pointer("/spec/completions").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
    if (is(def, "", "configmaps") || is(def, "", "secrets"))
        && old.get("immutable").and_then(|v| v.as_bool()) == Some(true)
    {
        if new.get("immutable").and_then(|v| v.as_bool()) != Some(true) {
            causes.push(Cause::forbidden(
                "immutable",
                "field is immutable when `immutable` is set",
            ));
        }
        for section in ["data", "binaryData"] {
            if old.get(section) != new.get(section) {
                causes.push(Cause::forbidden(
                    section,
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }
    if is(def, "", "persistentvolumeclaims") {
        let strip = |v: &Value| {
            let mut m = v
                .get("spec")
                .and_then(|s| s.as_object())
                .cloned()
                .unwrap_or_default();
            m.remove("resources");
            m.remove("volumeAttributesClassName");
            m.remove("volumeName");
            m
        };
        let (mut o, mut n) = (strip(old), strip(new));
        // Since Kubernetes 1.28 a claim without a class may be given one afterwards (the
        // retroactive default StorageClass assignment relies on it).
        if o.get("storageClassName").is_none_or(|v| v.is_null()) {
            o.remove("storageClassName");
            n.remove("storageClassName");
        }
        if o != n {
            causes.push(Cause::forbidden(
                "spec",
                "spec is immutable after creation except resources.requests for bound claims",
            ));
        }
    }
    causes
}

/// A field whose JSON type is not the Go type kube-apiserver decodes it into.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeError {
    /// Go's rendering: `DeploymentSpec.spec.replicas`.
    pub go_field: String,
    /// The JSON type found: `string`, `number`, `object`, `array`, `bool`.
    pub found: &'static str,
    /// The Go type expected: `int32`, `string`, …
    pub go_type: &'static str,
}

impl TypeError {
    /// `json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`.
    pub fn message(&self) -> String {
        format!(
            "json: cannot unmarshal {} into Go struct field {} of type {}",
            self.found, self.go_field, self.go_type
        )
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

/// The first field (of those packages write) whose JSON type cannot decode into the built-in
/// kind's Go type, as a real server finds when it decodes the body. `None` for custom resources
/// (their schema decides) and for objects that type-check.
pub fn type_error(def: &ResourceDef, obj: &Value) -> Option<TypeError> {
    if def.custom.is_some() {
        return None;
    }
    let int = |v: &Value| v.is_i64() || v.is_u64();
    let check = |ptr: &str, go_struct: &str, go_type: &'static str, ok: &dyn Fn(&Value) -> bool| {
        let v = obj.pointer(ptr)?;
        if v.is_null() || ok(v) {
            return None;
        }
        Some(TypeError {
            go_field: format!("{go_struct}.{}", field_of(ptr)),
            found: json_type(v),
            go_type,
        })
    };
    for m in ["labels", "annotations"] {
        if let Some(Value::Object(map)) = obj.pointer(&format!("/metadata/{m}")) {
            for v in map.values() {
                if !v.is_string() && !v.is_null() {
                    return Some(TypeError {
                        go_field: format!("ObjectMeta.metadata.{m}"),
                        found: json_type(v),
                        go_type: "string",
                    });
                }
            }
        }
    }
    if let Some(e) = check("/metadata/name", "ObjectMeta", "string", &|v| v.is_string()) {
        return Some(e);
    }
    if is(def, "", "configmaps") || is(def, "", "secrets") {
        let kind = def.kind.clone();
        for section in ["data", "stringData", "binaryData"] {
            if let Some(Value::Object(map)) = obj.get(section) {
                for v in map.values() {
                    if !v.is_string() && !v.is_null() {
                        let go_type = if section == "data" && kind == "ConfigMap" || section == "stringData" {
                            "string"
                        } else {
                            "[]uint8"
                        };
                        return Some(TypeError {
                            go_field: format!("{kind}.{section}"),
                            found: json_type(v),
                            go_type,
                        });
                    }
                }
            }
        }
    }
    let spec_struct = format!("{}Spec", def.kind);
    let ints: &[&str] = match (def.group.as_str(), def.plural.as_str()) {
        ("apps", "deployments") => &[
            "replicas",
            "minReadySeconds",
            "revisionHistoryLimit",
            "progressDeadlineSeconds",
        ],
        ("apps", "statefulsets") => &["replicas", "minReadySeconds", "revisionHistoryLimit"],
        ("apps", "replicasets") => &["replicas", "minReadySeconds"],
        ("apps", "daemonsets") => &["minReadySeconds", "revisionHistoryLimit"],
        ("batch", "jobs") => &[
            "parallelism",
            "completions",
            "backoffLimit",
            "activeDeadlineSeconds",
            "ttlSecondsAfterFinished",
        ],
        _ => &[],
    };
    for f in ints {
        let go_type = if *f == "activeDeadlineSeconds" {
            "int64"
        } else {
            "int32"
        };
        if let Some(e) = check(&format!("/spec/{f}"), &spec_struct, go_type, &int) {
            return Some(e);
        }
    }
    if let Some(ptr) = pod_spec_ptr(def) {
        for list in ["initContainers", "containers"] {
            let Some(cs) = obj.pointer(&format!("{ptr}/{list}")).and_then(|v| v.as_array()) else {
                continue;
            };
            let go_list = format!("{}.{list}", field_of(ptr));
            for c in cs {
                for (f, t) in [("name", "string"), ("image", "string")] {
                    if let Some(v) = c.get(f)
                        && !v.is_string()
                        && !v.is_null()
                    {
                        return Some(TypeError {
                            go_field: format!("Container.{go_list}.{f}"),
                            found: json_type(v),
                            go_type: t,
                        });
                    }
                }
                for p in c.get("ports").and_then(|v| v.as_array()).into_iter().flatten() {
                    if let Some(v) = p.get("containerPort")
                        && !int(v)
                        && !v.is_null()
                    {
                        return Some(TypeError {
                            go_field: format!("ContainerPort.{go_list}.ports.containerPort"),
                            found: json_type(v),
                            go_type: "int32",
                        });
                    }
                }
            }
        }
    }
    if is(def, "", "services") {
        for p in obj
            .pointer("/spec/ports")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(v) = p.get("port")
                && !int(v)
                && !v.is_null()
            {
                return Some(TypeError {
                    go_field: "ServicePort.spec.ports.port".into(),
                    found: json_type(v),
                    go_type: "int32",
                });
            }
        }
    }
    None
}
