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

fn is_qualified_name(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(is_dns_subdomain) && !name.is_empty() && is_label_value(name)
}

/// Label keys and values, checked on every write as the real server does.
fn validate_labels(obj: &Value, causes: &mut Vec<Cause>) {
    for (k, v) in meta::labels(obj) {
        if !is_qualified_name(&k) {
            causes.push(Cause::invalid(
                "metadata.labels",
                &json!(k),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ));
        }
        let value = v.as_str().unwrap_or("");
        if !v.is_string() || !is_label_value(value) {
            causes.push(Cause::invalid(
                "metadata.labels",
                &v,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ));
        }
    }
}

/// Validation of a new object.
pub fn validate_create(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_labels(obj, &mut causes);
    let name = meta::name(obj);
    let label_named = def.group.is_empty() && ["namespaces", "services"].contains(&def.plural.as_str());
    if label_named && !is_dns_label(name) {
        causes.push(Cause::invalid(
            "metadata.name",
            &json!(name),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ));
    } else if !label_named && def.plural != "events" && !is_dns_subdomain(name) && !name.contains(':') {
        causes.push(Cause::invalid(
            "metadata.name",
            &json!(name),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ));
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
        if obj
            .pointer("/spec/template/spec/containers")
            .and_then(|v| v.as_array())
            .is_none_or(|a| a.is_empty())
        {
            causes.push(Cause::required("spec.template.spec.containers", ""));
        }
    }
    if is(def, "", "pods")
        && obj
            .pointer("/spec/containers")
            .and_then(|v| v.as_array())
            .is_none_or(|a| a.is_empty())
    {
        causes.push(Cause::required("spec.containers", ""));
    }
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
    validate_labels(new, &mut causes);
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
            causes.push(Cause::invalid(
                "spec.clusterIPs[0]",
                &json!([ni]),
                "may not change once set",
            ));
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
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            ));
        }
    }
    causes
}
