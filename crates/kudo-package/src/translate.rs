//! Translating objects written for API versions Kubernetes has since removed into the GA version
//! that replaced them.
//!
//! Packages from the KUDO catalog were written for Kubernetes 1.15–1.19: they ship
//! `policy/v1beta1` PodDisruptionBudgets, `rbac.authorization.k8s.io/v1beta1` roles,
//! `apiextensions.k8s.io/v1beta1` CRDs… which current clusters no longer serve. Rather than fail
//! such a package, the manager (when discovery says the version is not served), `package render
//! --kubernetes-version` and `package verify` convert the object with [`translate`], following the
//! field mappings of the Kubernetes API deprecation guide. Where the old version had a different
//! default than the new one, the old default is written out so the object keeps its meaning.
//! A field the new version has no place for is an error naming the field: silently dropping it
//! would change what the package asked for.
//!
//! Everything here is pure (no IO), so the three callers agree exactly.

use serde_json::{Map, Value, json};

/// One removed `apiVersion` of one kind and what replaced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// The removed `apiVersion` (`policy/v1beta1`).
    pub from: &'static str,
    /// The `kind` the mapping applies to (`PodDisruptionBudget`).
    pub kind: &'static str,
    /// The served replacement (`policy/v1`).
    pub to: &'static str,
    /// The Kubernetes minor version (1.x) that stopped serving `from`.
    pub removed_in: u32,
}

const fn m(from: &'static str, kind: &'static str, to: &'static str, removed_in: u32) -> Mapping {
    Mapping {
        from,
        kind,
        to,
        removed_in,
    }
}

/// Every translation known, from the deprecation guide's removal list.
pub const MAPPINGS: &[Mapping] = &[
    // 1.16
    m("extensions/v1beta1", "Deployment", "apps/v1", 16),
    m("apps/v1beta1", "Deployment", "apps/v1", 16),
    m("apps/v1beta2", "Deployment", "apps/v1", 16),
    m("apps/v1beta1", "StatefulSet", "apps/v1", 16),
    m("apps/v1beta2", "StatefulSet", "apps/v1", 16),
    m("extensions/v1beta1", "DaemonSet", "apps/v1", 16),
    m("apps/v1beta2", "DaemonSet", "apps/v1", 16),
    m("extensions/v1beta1", "ReplicaSet", "apps/v1", 16),
    m("apps/v1beta1", "ReplicaSet", "apps/v1", 16),
    m("apps/v1beta2", "ReplicaSet", "apps/v1", 16),
    m("extensions/v1beta1", "NetworkPolicy", "networking.k8s.io/v1", 16),
    // 1.22
    m("extensions/v1beta1", "Ingress", "networking.k8s.io/v1", 22),
    m("networking.k8s.io/v1beta1", "Ingress", "networking.k8s.io/v1", 22),
    m(
        "rbac.authorization.k8s.io/v1beta1",
        "Role",
        "rbac.authorization.k8s.io/v1",
        22,
    ),
    m(
        "rbac.authorization.k8s.io/v1beta1",
        "ClusterRole",
        "rbac.authorization.k8s.io/v1",
        22,
    ),
    m(
        "rbac.authorization.k8s.io/v1beta1",
        "RoleBinding",
        "rbac.authorization.k8s.io/v1",
        22,
    ),
    m(
        "rbac.authorization.k8s.io/v1beta1",
        "ClusterRoleBinding",
        "rbac.authorization.k8s.io/v1",
        22,
    ),
    m(
        "apiextensions.k8s.io/v1beta1",
        "CustomResourceDefinition",
        "apiextensions.k8s.io/v1",
        22,
    ),
    m(
        "admissionregistration.k8s.io/v1beta1",
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        22,
    ),
    m(
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io/v1",
        22,
    ),
    m(
        "scheduling.k8s.io/v1beta1",
        "PriorityClass",
        "scheduling.k8s.io/v1",
        22,
    ),
    m("storage.k8s.io/v1beta1", "StorageClass", "storage.k8s.io/v1", 22),
    m("storage.k8s.io/v1beta1", "CSIDriver", "storage.k8s.io/v1", 22),
    // 1.25
    m("batch/v1beta1", "CronJob", "batch/v1", 25),
    m("policy/v1beta1", "PodDisruptionBudget", "policy/v1", 25),
    m(
        "autoscaling/v2beta1",
        "HorizontalPodAutoscaler",
        "autoscaling/v2",
        25,
    ),
    // 1.26
    m(
        "autoscaling/v2beta2",
        "HorizontalPodAutoscaler",
        "autoscaling/v2",
        26,
    ),
];

/// The translation for a removed `apiVersion` of `kind`, if one is known.
pub fn mapping(api_version: &str, kind: &str) -> Option<&'static Mapping> {
    MAPPINGS.iter().find(|m| m.from == api_version && m.kind == kind)
}

/// Why an object cannot be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// No translation is known for this apiVersion/kind.
    #[error(
        "{kind} {api_version} is not served and kudo-rs knows no translation of {api_version} {kind} to a served version"
    )]
    NoMapping {
        /// The object's `apiVersion`, which the cluster does not serve.
        api_version: String,
        /// The object's `kind`.
        kind: String,
    },
    /// The replacement version has no place for a field the object sets.
    #[error("{0}")]
    LosesInformation(Box<Loss>),
}

/// What a translation would lose (see [`TranslateError::LosesInformation`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot translate {kind} {name:?} from {from} to {to}: field {field} {reason}")]
pub struct Loss {
    /// The object's `kind`.
    pub kind: String,
    /// The object's `metadata.name`.
    pub name: String,
    /// The removed `apiVersion` the object uses.
    pub from: String,
    /// The served `apiVersion` it would be translated to.
    pub to: String,
    /// Path of the field, e.g. `spec.rollbackTo`.
    pub field: String,
    /// Why the field cannot be carried over, completing "field X …" in the message.
    pub reason: String,
}

/// A translated object.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    /// The object as the served version spells it.
    pub object: Value,
    /// The removed `apiVersion` the object was written for.
    pub from: String,
    /// The served `apiVersion` it now has.
    pub to: String,
    /// Meaning-preserving adjustments made on the way (old defaults written out, a schema
    /// marked as preserving unknown fields…), for the user to read.
    pub notes: Vec<String>,
}

/// A Kubernetes version [`parse_minor`] does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Kubernetes version {0:?}: expected MAJOR.MINOR with major 1, e.g. 1.28")]
pub struct KubernetesVersionError(pub String);

/// A `major.minor` Kubernetes version as `package render --kubernetes-version` takes it.
pub fn parse_minor(version: &str) -> Result<u32, KubernetesVersionError> {
    let v = version.trim().trim_start_matches('v');
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next().unwrap_or_default();
    let minor = parts.next().unwrap_or_default();
    match (major.parse::<u32>(), minor.parse::<u32>()) {
        (Ok(1), Ok(minor)) => Ok(minor),
        _ => Err(KubernetesVersionError(version.to_string())),
    }
}

/// Translates `obj` if its apiVersion is one Kubernetes 1.`minor` no longer serves; `Ok(None)`
/// when the object can be applied as written.
pub fn translate_for_minor(obj: &Value, minor: u32) -> Result<Option<Translated>, TranslateError> {
    let av = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    match mapping(av, kind) {
        Some(m) if minor >= m.removed_in => translate(obj).map(Some),
        _ => Ok(None),
    }
}

/// Converts an object of a removed apiVersion into its replacement (the caller decided it is not
/// served). Fails for versions without a mapping and for objects whose fields the replacement
/// cannot hold.
pub fn translate(obj: &Value) -> Result<Translated, TranslateError> {
    let av = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let Some(m) = mapping(av, kind) else {
        return Err(TranslateError::NoMapping {
            api_version: av.to_string(),
            kind: kind.to_string(),
        });
    };
    let mut t = Tx {
        m,
        name: obj["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        obj: obj.clone(),
        notes: Vec::new(),
    };
    t.obj["apiVersion"] = Value::String(m.to.to_string());
    match (m.from, m.kind) {
        (_, "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") => t.workload()?,
        (_, "Ingress") => t.ingress()?,
        (_, "PodDisruptionBudget") => t.pdb(),
        (_, "CustomResourceDefinition") => t.crd()?,
        (_, "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => t.webhooks()?,
        ("autoscaling/v2beta1", _) => t.hpa_v2beta1()?,
        // Same schema in both versions: only the apiVersion changes.
        _ => {}
    }
    Ok(Translated {
        object: t.obj,
        from: m.from.to_string(),
        to: m.to.to_string(),
        notes: t.notes,
    })
}

/// An expected-object pattern (a kuttl assert or error file: a partial object matched as a
/// subset) written for a removed `apiVersion`, in the served replacement; `Ok(None)` when no
/// translation is known. A pattern that is a whole object is translated as [`translate`] does, so
/// it names what the manager applied; one that names only an identity (`apiVersion`, `kind`,
/// `metadata`, e.g. a CRD asserted by name) just gets the new `apiVersion`, where [`translate`]
/// would miss the fields it needs. Any other pattern the translation refuses is that error.
pub fn translate_pattern(pattern: &Value) -> Result<Option<Value>, TranslateError> {
    let av = pattern["apiVersion"].as_str().unwrap_or_default();
    let kind = pattern["kind"].as_str().unwrap_or_default();
    let Some(m) = mapping(av, kind) else {
        return Ok(None);
    };
    let identity_only = pattern.as_object().is_some_and(|o| {
        o.keys()
            .all(|k| matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
    });
    match translate(pattern) {
        Ok(t) => Ok(Some(t.object)),
        Err(_) if identity_only => {
            let mut p = pattern.clone();
            p["apiVersion"] = Value::String(m.to.to_string());
            Ok(Some(p))
        }
        Err(e) => Err(e),
    }
}

/// The object being translated.
struct Tx {
    m: &'static Mapping,
    name: String,
    obj: Value,
    notes: Vec<String>,
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

impl Tx {
    fn lossy(&self, field: impl Into<String>, reason: impl Into<String>) -> TranslateError {
        TranslateError::LosesInformation(Box::new(Loss {
            kind: self.m.kind.to_string(),
            name: self.name.clone(),
            from: self.m.from.to_string(),
            to: self.m.to.to_string(),
            field: field.into(),
            reason: reason.into(),
        }))
    }

    fn spec(&mut self) -> &mut Map<String, Value> {
        if !self.obj["spec"].is_object() {
            self.obj["spec"] = json!({});
        }
        self.obj["spec"].as_object_mut().expect("spec is an object")
    }

    /// Sets `spec.<path>` to `value` when absent, noting the old default written out.
    fn default_old(&mut self, path: &[&str], value: Value, why: &str) {
        let mut cur = self.spec();
        for key in &path[..path.len() - 1] {
            let entry = cur.entry(key.to_string()).or_insert_with(|| json!({}));
            if !entry.is_object() {
                return;
            }
            cur = entry.as_object_mut().expect("checked object");
        }
        let last = path[path.len() - 1];
        if cur.get(last).is_none_or(Value::is_null) {
            cur.insert(last.to_string(), value.clone());
            let note = format!("spec.{} set to {value} ({why})", path.join("."));
            self.notes.push(note);
        }
    }

    /// Deployment, StatefulSet, DaemonSet, ReplicaSet → apps/v1.
    fn workload(&mut self) -> Result<(), TranslateError> {
        let (from, kind) = (self.m.from, self.m.kind);
        let spec = self.obj["spec"].clone();
        if kind == "Deployment" && !is_empty_value(&spec["rollbackTo"]) {
            return Err(self.lossy(
                "spec.rollbackTo",
                "does not exist in apps/v1 (rollbacks are done with `kubectl rollout undo`)",
            ));
        }
        if kind == "DaemonSet" && !spec["templateGeneration"].is_null() {
            return Err(self.lossy("spec.templateGeneration", "does not exist in apps/v1"));
        }
        if let Some(s) = self.obj["spec"].as_object_mut() {
            s.remove("rollbackTo");
        }
        // The old versions defaulted a missing selector to the pod template's labels; apps/v1
        // requires it.
        if is_empty_value(&spec["selector"]) {
            let labels = spec["template"]["metadata"]["labels"].clone();
            if is_empty_value(&labels) {
                return Err(self.lossy(
                    "spec.selector",
                    "is required in apps/v1 and cannot be derived: spec.template.metadata.labels is empty",
                ));
            }
            self.spec()
                .insert("selector".into(), json!({"matchLabels": labels}));
            self.notes
                .push("spec.selector derived from spec.template.metadata.labels".into());
        }
        match (from, kind) {
            ("extensions/v1beta1", "Deployment") => {
                let no_limit = json!(i32::MAX);
                self.default_old(
                    &["progressDeadlineSeconds"],
                    no_limit.clone(),
                    "extensions/v1beta1 had no deadline",
                );
                self.default_old(
                    &["revisionHistoryLimit"],
                    no_limit,
                    "extensions/v1beta1 kept every revision",
                );
                let rolling = spec["strategy"]["type"]
                    .as_str()
                    .is_none_or(|t| t == "RollingUpdate");
                if rolling {
                    self.default_old(
                        &["strategy", "rollingUpdate", "maxSurge"],
                        json!(1),
                        "the extensions/v1beta1 default",
                    );
                    self.default_old(
                        &["strategy", "rollingUpdate", "maxUnavailable"],
                        json!(1),
                        "the extensions/v1beta1 default",
                    );
                }
            }
            ("apps/v1beta1", "Deployment") => {
                self.default_old(&["revisionHistoryLimit"], json!(2), "the apps/v1beta1 default");
            }
            ("apps/v1beta1", "StatefulSet") | ("extensions/v1beta1", "DaemonSet") => {
                self.default_old(
                    &["updateStrategy", "type"],
                    json!("OnDelete"),
                    &format!("the {from} default"),
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// policy/v1beta1 → policy/v1. An empty selector selected no pods in v1beta1 but selects
    /// every pod of the namespace in v1; an absent selector selects none in both, so an empty
    /// one is removed.
    fn pdb(&mut self) {
        let sel = &self.obj["spec"]["selector"];
        let empty = sel.is_object()
            && is_empty_value(&sel["matchLabels"])
            && is_empty_value(&sel["matchExpressions"]);
        if empty {
            if let Some(s) = self.obj["spec"].as_object_mut() {
                s.remove("selector");
            }
            self.notes.push(
                "empty spec.selector removed: it selected no pods in policy/v1beta1, and an empty selector selects all pods in policy/v1"
                    .into(),
            );
        }
    }

    /// extensions/v1beta1, networking.k8s.io/v1beta1 Ingress → networking.k8s.io/v1.
    fn ingress(&mut self) -> Result<(), TranslateError> {
        let mut spec = self.obj["spec"].clone();
        if let Some(s) = spec.as_object_mut() {
            if let Some(b) = s.remove("backend") {
                let b = self.backend(&b, "spec.backend")?;
                s.insert("defaultBackend".into(), b);
            }
            if let Some(rules) = s.get_mut("rules").and_then(Value::as_array_mut) {
                for (i, rule) in rules.iter_mut().enumerate() {
                    let Some(paths) = rule["http"]["paths"].as_array_mut() else {
                        continue;
                    };
                    for (j, path) in paths.iter_mut().enumerate() {
                        let field = format!("spec.rules[{i}].http.paths[{j}].backend");
                        if !path["backend"].is_null() {
                            path["backend"] = self.backend(&path["backend"], &field)?;
                        }
                        if path["pathType"].is_null() {
                            path["pathType"] = json!("ImplementationSpecific");
                        }
                    }
                }
            }
        }
        self.obj["spec"] = spec;
        Ok(())
    }

    fn backend(&self, b: &Value, field: &str) -> Result<Value, TranslateError> {
        let mut out = b.as_object().cloned().unwrap_or_default();
        let name = out.remove("serviceName");
        let port = out.remove("servicePort");
        match (name, port) {
            (None, None) => {}
            (Some(Value::String(name)), port) => {
                let port = match port {
                    Some(Value::Number(n)) => json!({"number": n}),
                    Some(Value::String(s)) => json!({"name": s}),
                    None | Some(Value::Null) => {
                        return Err(
                            self.lossy(format!("{field}.servicePort"), "is required with serviceName")
                        );
                    }
                    Some(_) => {
                        return Err(self.lossy(
                            format!("{field}.servicePort"),
                            "is neither a port number nor a port name",
                        ));
                    }
                };
                out.insert("service".into(), json!({"name": name, "port": port}));
            }
            _ => {
                return Err(self.lossy(
                    format!("{field}.serviceName"),
                    "must be a string together with servicePort",
                ));
            }
        }
        Ok(Value::Object(out))
    }

    /// admissionregistration.k8s.io/v1beta1 webhooks → v1: the v1beta1 defaults that v1 changed
    /// are written out; `sideEffects` and `admissionReviewVersions` became required.
    fn webhooks(&mut self) -> Result<(), TranslateError> {
        let mut hooks = self.obj["webhooks"].clone();
        if let Some(list) = hooks.as_array_mut() {
            for (i, h) in list.iter_mut().enumerate() {
                let Some(h) = h.as_object_mut() else { continue };
                let mut set = |key: &str, v: Value, notes: &mut Vec<String>| {
                    if h.get(key).is_none_or(Value::is_null) {
                        notes.push(format!("webhooks[{i}].{key} set to {v} (the v1beta1 default)"));
                        h.insert(key.to_string(), v);
                    }
                };
                set("failurePolicy", json!("Ignore"), &mut self.notes);
                set("matchPolicy", json!("Exact"), &mut self.notes);
                set("timeoutSeconds", json!(30), &mut self.notes);
                set("admissionReviewVersions", json!(["v1beta1"]), &mut self.notes);
                match h.get("sideEffects").and_then(Value::as_str) {
                    None => {
                        h.insert("sideEffects".into(), json!("None"));
                        self.notes.push(format!(
                            "webhooks[{i}].sideEffects set to \"None\" (required in v1)"
                        ));
                    }
                    Some("None" | "NoneOnDryRun") => {}
                    Some(other) => {
                        return Err(self.lossy(
                            format!("webhooks[{i}].sideEffects"),
                            format!("is {other:?}; v1 only allows None or NoneOnDryRun"),
                        ));
                    }
                }
            }
        }
        self.obj["webhooks"] = hooks;
        Ok(())
    }

    /// autoscaling/v2beta1 → v2: each metric's target fields move into `target`, the metric
    /// name and selector into `metric`.
    fn hpa_v2beta1(&mut self) -> Result<(), TranslateError> {
        let mut metrics = self.obj["spec"]["metrics"].clone();
        if let Some(list) = metrics.as_array_mut() {
            for (i, metric) in list.iter_mut().enumerate() {
                let ty = metric["type"].as_str().unwrap_or_default().to_string();
                let key = match ty.as_str() {
                    "Resource" => "resource",
                    "ContainerResource" => "containerResource",
                    "Pods" => "pods",
                    "Object" => "object",
                    "External" => "external",
                    _ => continue,
                };
                let field = format!("spec.metrics[{i}].{key}");
                let src = metric[key].as_object().cloned().unwrap_or_default();
                let converted = self.hpa_metric(key, src, &field)?;
                metric[key] = Value::Object(converted);
            }
        }
        if !self.obj["spec"]["metrics"].is_null() {
            self.obj["spec"]["metrics"] = metrics;
        }
        Ok(())
    }

    fn hpa_metric(
        &self,
        key: &str,
        mut src: Map<String, Value>,
        field: &str,
    ) -> Result<Map<String, Value>, TranslateError> {
        let mut out = Map::new();
        let mut target = Map::new();
        let mut take = |from: &str, ty: &str, to: &str, target: &mut Map<String, Value>| {
            if let Some(v) = src.remove(from).filter(|v| !v.is_null()) {
                if target.contains_key("type") {
                    return Err(format!("{from} (only one target can be given in v2)"));
                }
                target.insert("type".into(), json!(ty));
                target.insert(to.into(), v);
            }
            Ok(())
        };
        let result = match key {
            "resource" | "containerResource" => take(
                "targetAverageUtilization",
                "Utilization",
                "averageUtilization",
                &mut target,
            )
            .and_then(|_| take("targetAverageValue", "AverageValue", "averageValue", &mut target)),
            "pods" => take("targetAverageValue", "AverageValue", "averageValue", &mut target),
            _ => take("targetValue", "Value", "value", &mut target).and_then(|_| {
                take("targetAverageValue", "AverageValue", "averageValue", &mut target)
                    .and_then(|_| take("averageValue", "AverageValue", "averageValue", &mut target))
            }),
        };
        if let Err(f) = result {
            return Err(self.lossy(format!("{field}.{}", f.split(' ').next().unwrap_or("")), f));
        }
        match key {
            "resource" | "containerResource" => {
                for k in ["name", "container"] {
                    if let Some(v) = src.remove(k) {
                        out.insert(k.into(), v);
                    }
                }
            }
            _ => {
                let mut metric = Map::new();
                if let Some(n) = src.remove("metricName") {
                    metric.insert("name".into(), n);
                }
                let sel_key = if key == "external" {
                    "metricSelector"
                } else {
                    "selector"
                };
                if let Some(s) = src.remove(sel_key).filter(|s| !s.is_null()) {
                    metric.insert("selector".into(), s);
                }
                out.insert("metric".into(), Value::Object(metric));
                if key == "object"
                    && let Some(t) = src.remove("target")
                {
                    out.insert("describedObject".into(), t);
                }
            }
        }
        if let Some((k, _)) = src.iter().find(|(_, v)| !v.is_null()) {
            return Err(self.lossy(format!("{field}.{k}"), "has no counterpart in autoscaling/v2"));
        }
        out.insert("target".into(), Value::Object(target));
        Ok(out)
    }

    /// apiextensions.k8s.io/v1beta1 → v1: versions, schema, subresources and printer columns
    /// become per-version; `preserveUnknownFields` (default true in v1beta1) becomes
    /// `x-kubernetes-preserve-unknown-fields` on the root schema; a schema that is not structural
    /// (v1 requires it) is replaced by one that preserves unknown fields.
    fn crd(&mut self) -> Result<(), TranslateError> {
        let mut spec = self.obj["spec"].as_object().cloned().unwrap_or_default();
        let single = spec.remove("version");
        let validation = spec.remove("validation");
        let subresources = spec.remove("subresources");
        let columns = spec.remove("additionalPrinterColumns");
        let preserve = spec.remove("preserveUnknownFields");
        let preserve = preserve.as_ref().and_then(Value::as_bool).unwrap_or(true);
        let mut versions: Vec<Value> = match spec.remove("versions") {
            Some(Value::Array(v)) if !v.is_empty() => v,
            _ => match single.as_ref().and_then(Value::as_str) {
                Some(name) => vec![json!({"name": name, "served": true, "storage": true})],
                None => return Err(self.lossy("spec.version", "and spec.versions are both missing")),
            },
        };
        if let (Some(name), Some(first)) = (single.as_ref().and_then(Value::as_str), versions.first())
            && first["name"].as_str() != Some(name)
        {
            return Err(self.lossy(
                "spec.version",
                format!("{name:?} must be the first entry of spec.versions"),
            ));
        }
        let top_schema = validation
            .as_ref()
            .map(|v| v["openAPIV3Schema"].clone())
            .filter(|s| !s.is_null());
        for (i, v) in versions.iter_mut().enumerate() {
            let Some(v) = v.as_object_mut() else { continue };
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let schema = v
                .remove("schema")
                .map(|s| s["openAPIV3Schema"].clone())
                .filter(|s| !s.is_null())
                .or_else(|| top_schema.clone());
            let schema = match schema {
                None => {
                    self.notes.push(format!(
                        "version {name}: no schema in v1beta1, so it preserves unknown fields"
                    ));
                    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
                }
                Some(s) => match structural_problem(&s, "") {
                    Some(problem) => {
                        self.notes.push(format!(
                            "version {name}: the v1beta1 schema is not structural ({problem}), so the version preserves unknown fields without validation"
                        ));
                        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
                    }
                    None => {
                        let mut s = s;
                        if preserve && s.get("x-kubernetes-preserve-unknown-fields").is_none() {
                            s["x-kubernetes-preserve-unknown-fields"] = json!(true);
                            self.notes.push(format!(
                                "version {name}: preserveUnknownFields (true in v1beta1) kept as x-kubernetes-preserve-unknown-fields on the root schema"
                            ));
                        }
                        s
                    }
                },
            };
            v.insert("schema".into(), json!({"openAPIV3Schema": schema}));
            if !v.contains_key("subresources")
                && let Some(s) = subresources.clone().filter(|s| !s.is_null())
            {
                v.insert("subresources".into(), s);
            }
            let cols = v.remove("additionalPrinterColumns").or_else(|| columns.clone());
            if let Some(Value::Array(cols)) = cols {
                let mut out = Vec::new();
                for (j, c) in cols.into_iter().enumerate() {
                    let mut c = c.as_object().cloned().unwrap_or_default();
                    match c.remove("JSONPath") {
                        Some(p) => {
                            c.insert("jsonPath".into(), p);
                        }
                        None if c.contains_key("jsonPath") => {}
                        None => {
                            return Err(self.lossy(
                                format!("spec.versions[{i}].additionalPrinterColumns[{j}].JSONPath"),
                                "is required",
                            ));
                        }
                    }
                    out.push(Value::Object(c));
                }
                v.insert("additionalPrinterColumns".into(), Value::Array(out));
            }
        }
        spec.insert("versions".into(), Value::Array(versions));
        if let Some(conv) = spec.remove("conversion") {
            let mut conv = conv.as_object().cloned().unwrap_or_default();
            let cfg = conv.remove("webhookClientConfig");
            let review = conv.remove("conversionReviewVersions");
            if conv.get("strategy").and_then(Value::as_str) == Some("Webhook") {
                let Some(cfg) = cfg else {
                    return Err(self.lossy(
                        "spec.conversion.webhookClientConfig",
                        "is required for the Webhook strategy",
                    ));
                };
                conv.insert(
                    "webhook".into(),
                    json!({"clientConfig": cfg,
                           "conversionReviewVersions": review.unwrap_or_else(|| json!(["v1beta1"]))}),
                );
            }
            spec.insert("conversion".into(), Value::Object(conv));
        }
        self.obj["spec"] = Value::Object(spec);
        Ok(())
    }
}

/// The first reason (with its path) why an OpenAPI schema is not structural in the sense v1
/// CRDs require — every node states its `type` unless it is int-or-string or preserves unknown
/// fields, no `additionalProperties: false` or `additionalProperties` beside `properties`, no
/// `uniqueItems: true` — or `None`. `allOf`/`anyOf`/`oneOf`/`not` branches may omit types but
/// must not introduce new ones that disagree; they are not examined further.
pub fn structural_problem(schema: &Value, path: &str) -> Option<String> {
    let at = |p: &str| {
        if p.is_empty() {
            "the root".to_string()
        } else {
            p.to_string()
        }
    };
    let Some(o) = schema.as_object() else {
        return Some(format!("{} is not an object", at(path)));
    };
    let flag = |k: &str| o.get(k).and_then(Value::as_bool) == Some(true);
    if !o.contains_key("type")
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        return Some(format!("{} has no type", at(path)));
    }
    if path.is_empty() && o.get("type").and_then(Value::as_str) != Some("object") {
        return Some("the root is not of type object".into());
    }
    if flag("uniqueItems") {
        return Some(format!("{} sets uniqueItems: true", at(path)));
    }
    match o.get("additionalProperties") {
        Some(Value::Bool(false)) => return Some(format!("{} sets additionalProperties: false", at(path))),
        Some(ap @ Value::Object(_)) => {
            if o.contains_key("properties") {
                return Some(format!(
                    "{} has both properties and additionalProperties",
                    at(path)
                ));
            }
            if let Some(p) = structural_problem(ap, &format!("{path}.additionalProperties")) {
                return Some(p);
            }
        }
        _ => {}
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            if let Some(problem) = structural_problem(v, &p) {
                return Some(problem);
            }
        }
    }
    if let Some(items) = o.get("items") {
        if items.is_array() {
            return Some(format!(
                "{}.items is a list (a single schema is required)",
                at(path)
            ));
        }
        if let Some(p) = structural_problem(items, &format!("{path}[]")) {
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tr(v: Value) -> Translated {
        translate(&v).unwrap()
    }

    #[test]
    fn every_mapping_targets_a_different_version_of_the_same_kind() {
        for m in MAPPINGS {
            assert_ne!(m.from, m.to);
            assert_eq!(mapping(m.from, m.kind), Some(m));
            assert!(mapping(m.to, m.kind).is_none(), "{} is current", m.to);
        }
    }

    #[test]
    fn unknown_version_names_api_version_and_kind() {
        let e = translate(&json!({"apiVersion": "policy/v1beta1", "kind": "PodSecurityPolicy"})).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("policy/v1beta1") && s.contains("PodSecurityPolicy"),
            "{s}"
        );
    }

    #[test]
    fn pdb_keeps_selector_and_bounds() {
        let t = tr(
            json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "p"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "zk"}}}}),
        );
        assert_eq!(t.object["apiVersion"], "policy/v1");
        assert_eq!(
            t.object["spec"],
            json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": "zk"}}})
        );
        assert_eq!((t.from.as_str(), t.to.as_str()), ("policy/v1beta1", "policy/v1"));
        assert!(t.notes.is_empty());
    }

    #[test]
    fn pdb_empty_selector_keeps_selecting_nothing() {
        for sel in [json!({}), json!({"matchLabels": {}})] {
            let t = tr(
                json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "p"}, "spec": {"minAvailable": 2, "selector": sel}}),
            );
            assert!(t.object["spec"].get("selector").is_none(), "{}", t.object);
            assert_eq!(t.object["spec"]["minAvailable"], 2);
            assert_eq!(t.notes.len(), 1);
        }
    }

    #[test]
    fn rbac_kinds_change_only_the_version() {
        for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
            let obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": kind,
                "metadata": {"name": "r"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}});
            let t = tr(obj.clone());
            let mut want = obj;
            want["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
            assert_eq!(t.object, want);
        }
    }

    #[test]
    fn simple_kinds_change_only_the_version() {
        for (av, kind, to) in [
            ("batch/v1beta1", "CronJob", "batch/v1"),
            (
                "scheduling.k8s.io/v1beta1",
                "PriorityClass",
                "scheduling.k8s.io/v1",
            ),
            ("storage.k8s.io/v1beta1", "StorageClass", "storage.k8s.io/v1"),
            ("storage.k8s.io/v1beta1", "CSIDriver", "storage.k8s.io/v1"),
            ("autoscaling/v2beta2", "HorizontalPodAutoscaler", "autoscaling/v2"),
            ("extensions/v1beta1", "NetworkPolicy", "networking.k8s.io/v1"),
        ] {
            let obj = json!({"apiVersion": av, "kind": kind, "metadata": {"name": "x"}, "spec": {"a": 1}});
            let t = tr(obj);
            assert_eq!(t.object["apiVersion"], to);
            assert_eq!(t.object["spec"], json!({"a": 1}));
        }
    }

    #[test]
    fn workloads_get_a_selector_from_template_labels() {
        for (av, kind) in [
            ("apps/v1beta2", "StatefulSet"),
            ("apps/v1beta2", "ReplicaSet"),
            ("apps/v1beta2", "DaemonSet"),
            ("apps/v1beta2", "Deployment"),
        ] {
            let t = tr(json!({"apiVersion": av, "kind": kind, "metadata": {"name": "w"},
                "spec": {"template": {"metadata": {"labels": {"app": "w"}}, "spec": {}}}}));
            assert_eq!(t.object["apiVersion"], "apps/v1");
            assert_eq!(t.object["spec"]["selector"], json!({"matchLabels": {"app": "w"}}));
        }
        let given = tr(
            json!({"apiVersion": "apps/v1beta2", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"selector": {"matchLabels": {"x": "y"}},
                     "template": {"metadata": {"labels": {"x": "y", "z": "1"}}}}}),
        );
        assert_eq!(
            given.object["spec"]["selector"],
            json!({"matchLabels": {"x": "y"}})
        );
        let e = translate(
            &json!({"apiVersion": "apps/v1beta1", "kind": "StatefulSet", "metadata": {"name": "w"},
            "spec": {"template": {"spec": {}}}}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("spec.selector"), "{e}");
    }

    #[test]
    fn workloads_keep_the_old_defaults() {
        let t = tr(
            json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}),
        );
        let s = &t.object["spec"];
        assert_eq!(s["progressDeadlineSeconds"], i32::MAX);
        assert_eq!(s["revisionHistoryLimit"], i32::MAX);
        assert_eq!(
            s["strategy"]["rollingUpdate"],
            json!({"maxSurge": 1, "maxUnavailable": 1})
        );
        let t = tr(
            json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"revisionHistoryLimit": 3, "strategy": {"type": "Recreate"},
                     "template": {"metadata": {"labels": {"a": "b"}}}}}),
        );
        assert_eq!(t.object["spec"]["revisionHistoryLimit"], 3);
        assert_eq!(t.object["spec"]["strategy"], json!({"type": "Recreate"}));
        let t = tr(
            json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}),
        );
        assert_eq!(t.object["spec"]["revisionHistoryLimit"], 2);
        let t = tr(
            json!({"apiVersion": "apps/v1beta1", "kind": "StatefulSet", "metadata": {"name": "s"},
            "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}),
        );
        assert_eq!(t.object["spec"]["updateStrategy"]["type"], "OnDelete");
        let t = tr(
            json!({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet", "metadata": {"name": "s"},
            "spec": {"updateStrategy": {"type": "RollingUpdate"}, "template": {"metadata": {"labels": {"a": "b"}}}}}),
        );
        assert_eq!(t.object["spec"]["updateStrategy"]["type"], "RollingUpdate");
    }

    #[test]
    fn removed_workload_fields_fail_naming_the_field() {
        let e = translate(
            &json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"rollbackTo": {"revision": 3}, "template": {"metadata": {"labels": {"a": "b"}}}}}),
        )
        .unwrap_err();
        assert!(
            matches!(&e, TranslateError::LosesInformation(l) if l.field == "spec.rollbackTo"),
            "{e}"
        );
        assert!(e.to_string().contains("spec.rollbackTo") && e.to_string().contains("\"d\""));
        let e = translate(
            &json!({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet", "metadata": {"name": "d"},
            "spec": {"templateGeneration": 2, "template": {"metadata": {"labels": {"a": "b"}}}}}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("spec.templateGeneration"), "{e}");
    }

    #[test]
    fn ingress_backends_and_path_types() {
        for av in ["extensions/v1beta1", "networking.k8s.io/v1beta1"] {
            let t = tr(
                json!({"apiVersion": av, "kind": "Ingress", "metadata": {"name": "i"},
                "spec": {"backend": {"serviceName": "def", "servicePort": 80},
                         "tls": [{"hosts": ["a"], "secretName": "s"}],
                         "rules": [{"host": "a", "http": {"paths": [
                            {"path": "/", "backend": {"serviceName": "web", "servicePort": "http"}},
                            {"path": "/x", "pathType": "Prefix", "backend": {"serviceName": "x", "servicePort": 8080}}]}}]}}),
            );
            assert_eq!(t.object["apiVersion"], "networking.k8s.io/v1");
            let s = &t.object["spec"];
            assert!(s.get("backend").is_none());
            assert_eq!(
                s["defaultBackend"],
                json!({"service": {"name": "def", "port": {"number": 80}}})
            );
            let paths = &s["rules"][0]["http"]["paths"];
            assert_eq!(
                paths[0]["backend"],
                json!({"service": {"name": "web", "port": {"name": "http"}}})
            );
            assert_eq!(paths[0]["pathType"], "ImplementationSpecific");
            assert_eq!(paths[1]["pathType"], "Prefix");
            assert_eq!(paths[1]["backend"]["service"]["port"]["number"], 8080);
            assert_eq!(s["tls"][0]["secretName"], "s");
        }
        let e = translate(
            &json!({"apiVersion": "extensions/v1beta1", "kind": "Ingress", "metadata": {"name": "i"},
            "spec": {"backend": {"serviceName": "def"}}}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("spec.backend.servicePort"), "{e}");
    }

    #[test]
    fn hpa_v2beta1_metrics_move_into_metric_and_target() {
        let t = tr(
            json!({"apiVersion": "autoscaling/v2beta1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "minReplicas": 1, "maxReplicas": 5, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "targetAverageUtilization": 50}},
                {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "1k"}},
                {"type": "Object", "object": {"metricName": "rps",
                    "target": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "i"},
                    "targetValue": "10k"}},
                {"type": "External", "external": {"metricName": "queue", "metricSelector": {"matchLabels": {"q": "a"}},
                    "targetAverageValue": "30"}}]}}),
        );
        let ms = &t.object["spec"]["metrics"];
        assert_eq!(t.object["apiVersion"], "autoscaling/v2");
        assert_eq!(
            ms[0]["resource"],
            json!({"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}})
        );
        assert_eq!(
            ms[1]["pods"],
            json!({"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}})
        );
        assert_eq!(
            ms[2]["object"],
            json!({"metric": {"name": "rps"},
            "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "i"},
            "target": {"type": "Value", "value": "10k"}})
        );
        assert_eq!(
            ms[3]["external"],
            json!({"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
            "target": {"type": "AverageValue", "averageValue": "30"}})
        );
        assert_eq!(t.object["spec"]["maxReplicas"], 5);
        let e = translate(
            &json!({"apiVersion": "autoscaling/v2beta1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"}, "spec": {"metrics": [{"type": "Resource", "resource": {"name": "cpu",
            "targetAverageUtilization": 50, "targetAverageValue": "100m"}}]}}),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("spec.metrics[0].resource.targetAverageValue"),
            "{e}"
        );
    }

    #[test]
    fn webhooks_get_v1beta1_defaults_and_required_fields() {
        for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
            let t = tr(
                json!({"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": kind,
                "metadata": {"name": "w"}, "webhooks": [{"name": "a.b.c", "clientConfig": {"url": "https://x"}},
                {"name": "d.e.f", "sideEffects": "NoneOnDryRun", "failurePolicy": "Fail", "admissionReviewVersions": ["v1"]}]}),
            );
            let w = &t.object["webhooks"];
            assert_eq!(t.object["apiVersion"], "admissionregistration.k8s.io/v1");
            assert_eq!(w[0]["sideEffects"], "None");
            assert_eq!(w[0]["admissionReviewVersions"], json!(["v1beta1"]));
            assert_eq!(w[0]["failurePolicy"], "Ignore");
            assert_eq!(w[0]["matchPolicy"], "Exact");
            assert_eq!(w[0]["timeoutSeconds"], 30);
            assert_eq!(w[1]["sideEffects"], "NoneOnDryRun");
            assert_eq!(w[1]["failurePolicy"], "Fail");
            assert_eq!(w[1]["admissionReviewVersions"], json!(["v1"]));
        }
        let e = translate(&json!({"apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "w"},
            "webhooks": [{"name": "a.b.c", "sideEffects": "Some"}]}))
        .unwrap_err();
        assert!(e.to_string().contains("webhooks[0].sideEffects"), "{e}");
    }

    fn crd(spec: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "foos.example.com"},
            "spec": spec})
    }

    #[test]
    fn a_pattern_naming_only_a_crd_gets_the_served_version() {
        let p = json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "servicemonitors.monitoring.coreos.com"}});
        let t = translate_pattern(&p).unwrap().unwrap();
        assert_eq!(
            t,
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "servicemonitors.monitoring.coreos.com"}})
        );
    }

    #[test]
    fn a_whole_pattern_is_translated_as_the_manager_translates_it() {
        let whole = crd(
            json!({"group": "example.com", "version": "v1alpha1", "scope": "Namespaced",
            "names": {"plural": "foos", "kind": "Foo"}}),
        );
        assert_eq!(
            translate_pattern(&whole).unwrap().unwrap(),
            tr(whole.clone()).object
        );
    }

    #[test]
    fn a_partial_pattern_with_fields_the_translation_needs_is_refused() {
        let partial = crd(json!({"group": "example.com"}));
        let err = translate_pattern(&partial).unwrap_err().to_string();
        assert!(err.contains("spec.version"), "{err}");
    }

    #[test]
    fn a_served_or_unknown_version_is_left_alone() {
        for av in ["apiextensions.k8s.io/v1", "example.com/v1beta1"] {
            let p = json!({"apiVersion": av, "kind": "CustomResourceDefinition", "metadata": {"name": "x"}});
            assert_eq!(translate_pattern(&p).unwrap(), None, "{av}");
        }
    }

    #[test]
    fn crd_single_version_with_schema_columns_and_subresources() {
        let t = tr(crd(
            json!({"group": "example.com", "version": "v1alpha1", "scope": "Namespaced",
            "names": {"plural": "foos", "kind": "Foo"},
            "preserveUnknownFields": false,
            "validation": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}},
            "subresources": {"status": {}},
            "additionalPrinterColumns": [{"name": "Size", "type": "integer", "JSONPath": ".spec.size"}]}),
        ));
        let spec = &t.object["spec"];
        assert_eq!(t.object["apiVersion"], "apiextensions.k8s.io/v1");
        for gone in [
            "version",
            "validation",
            "subresources",
            "additionalPrinterColumns",
            "preserveUnknownFields",
        ] {
            assert!(spec.get(gone).is_none(), "{gone} left at the top");
        }
        let v = &spec["versions"][0];
        assert_eq!(v["name"], "v1alpha1");
        assert_eq!(v["served"], true);
        assert_eq!(v["storage"], true);
        assert_eq!(
            v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["type"],
            "integer"
        );
        assert!(
            v["schema"]["openAPIV3Schema"]
                .get("x-kubernetes-preserve-unknown-fields")
                .is_none()
        );
        assert_eq!(v["subresources"], json!({"status": {}}));
        assert_eq!(
            v["additionalPrinterColumns"],
            json!([{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}])
        );
        assert_eq!(spec["names"]["kind"], "Foo");
    }

    #[test]
    fn crd_preserve_unknown_fields_and_non_structural_schemas() {
        // preserveUnknownFields defaulted to true in v1beta1
        let t = tr(crd(
            json!({"group": "example.com", "names": {"plural": "foos", "kind": "Foo"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true},
                         {"name": "v2", "served": true, "storage": false,
                          "schema": {"openAPIV3Schema": {"properties": {"spec": {}}}}}],
            "validation": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}}),
        ));
        let vs = &t.object["spec"]["versions"];
        assert_eq!(
            vs[0]["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert_eq!(
            vs[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"],
            "object"
        );
        // v2's own schema has no types: not structural
        assert_eq!(
            vs[1]["schema"]["openAPIV3Schema"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert!(
            t.notes.iter().any(|n| n.contains("not structural")),
            "{:?}",
            t.notes
        );
        // no schema at all
        let t = tr(crd(
            json!({"group": "example.com", "version": "v1", "names": {"plural": "foos", "kind": "Foo"}}),
        ));
        assert_eq!(
            t.object["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
    }

    #[test]
    fn crd_conversion_webhook_and_errors() {
        let t = tr(crd(
            json!({"group": "g", "version": "v1", "names": {"plural": "foos", "kind": "Foo"},
            "conversion": {"strategy": "Webhook", "webhookClientConfig": {"url": "https://c"}}}),
        ));
        assert_eq!(
            t.object["spec"]["conversion"],
            json!({"strategy": "Webhook",
            "webhook": {"clientConfig": {"url": "https://c"}, "conversionReviewVersions": ["v1beta1"]}})
        );
        let e = translate(&crd(
            json!({"group": "g", "names": {"plural": "foos", "kind": "Foo"}}),
        ))
        .unwrap_err();
        assert!(e.to_string().contains("spec.version"), "{e}");
        let e = translate(&crd(
            json!({"group": "g", "version": "v1", "names": {"plural": "foos", "kind": "Foo"},
            "additionalPrinterColumns": [{"name": "A", "type": "string"}]}),
        ))
        .unwrap_err();
        assert!(
            e.to_string().contains("additionalPrinterColumns[0].JSONPath"),
            "{e}"
        );
    }

    #[test]
    fn structural_check() {
        assert_eq!(structural_problem(&json!({"type": "object"}), ""), None);
        assert!(
            structural_problem(&json!({"type": "object", "properties": {"a": {}}}), "")
                .unwrap()
                .contains("a has no type")
        );
        assert!(structural_problem(&json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}), "").is_some());
        assert!(structural_problem(&json!({"type": "object", "additionalProperties": false}), "").is_some());
        assert_eq!(
            structural_problem(
                &json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
                ""
            ),
            None
        );
    }

    #[test]
    fn versions_and_minor_selection() {
        assert_eq!(parse_minor("1.28"), Ok(28));
        assert_eq!(parse_minor("v1.37.1-kudo"), Ok(37));
        assert!(parse_minor("2.0").is_err());
        assert!(parse_minor("latest").is_err());
        let pdb = json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {}});
        assert!(translate_for_minor(&pdb, 24).unwrap().is_none());
        assert!(translate_for_minor(&pdb, 25).unwrap().is_some());
        let cur = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"});
        assert!(translate_for_minor(&cur, 33).unwrap().is_none());
    }
}
