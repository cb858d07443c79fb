//! KUDO's dependencies hash (KEP-27, KUDO ≥ 0.13): the pod template of every object with
//! `spec.template` or `spec.jobTemplate.spec.template` gets the annotation
//! [`DEPENDENCIES_HASH_ANNOTATION`], an md5 over the ConfigMaps and Secrets it mounts, so a change
//! of their content rolls the pods — and nothing else does.
//!
//! The rule, as KUDO v0.19 computed it (kudo-behaviour.md, "Dependencies hash"):
//! * **References** of a pod template: `imagePullSecrets` (Secrets), then `volumes[].configMap`
//!   and `volumes[].secret` in order; *not* `envFrom` or `env[].valueFrom`. All in the object's
//!   namespace. Objects without a pod template, or whose template references nothing, get no
//!   annotation.
//! * **Which version** of a dependency: the one rendered in the same task if there is one (the
//!   enhanced object), else the live object ([`for_hash`]: KUDO's
//!   `kudo.dev/last-applied-configuration` when present, else the object as read).
//! * Each dependency's hash is the md5 of its **sanitised** YAML: `apiVersion`/`kind` emptied, the
//!   namespace, uid, resourceVersion, generation, creationTimestamp, selfLink, generateName,
//!   clusterName and continue removed, `ownerReferences`/`finalizers`/`managedFields` set to `[]`,
//!   `annotations` to `{}`, `deletionGracePeriodSeconds` and `remainingItemCount` to 0 — exactly
//!   what apimachinery's `Unstructured` setters leave — written as `sigs.k8s.io/yaml` writes it
//!   (JSON → yaml.v2: sorted keys, Go's quoting; [`kudo_template::yaml::to_yaml`] is byte-exact).
//! * A dependency that does not exist, or carries [`SKIP_HASH_ANNOTATION`], hashes to 16 zero
//!   bytes.
//! * The annotation value is the hex md5 over the dependencies' 16-byte hashes, sorted by group,
//!   kind, version, namespace, name (duplicates kept).
//!
//! Pure: the caller supplies the live objects (the controller reads them; `package render` uses
//! the objects earlier tasks of the plan render, see [`add_hashes`]).

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

/// Pod-template annotation holding the hash.
pub const DEPENDENCIES_HASH_ANNOTATION: &str = "kudo.dev/dependencies-hash";
/// A ConfigMap/Secret with this annotation (any value) counts as unchanged forever.
pub const SKIP_HASH_ANNOTATION: &str = "kudo.dev/skip-hash-calculation";
/// KUDO's record of what it applied last; objects created by KUDO itself carry it.
pub const LAST_APPLIED_ANNOTATION: &str = "kudo.dev/last-applied-configuration";

/// The two kinds a pod template can depend on. The derive order (`ConfigMap` < `Secret`) is
/// KUDO's sort order by kind; both are in group "" version "v1".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DependencyKind {
    /// A `v1` ConfigMap, referenced by a `volumes[].configMap`.
    ConfigMap,
    /// A `v1` Secret, referenced by `imagePullSecrets` or a `volumes[].secret`.
    Secret,
}

impl DependencyKind {
    /// The Kubernetes `kind` of the dependency (`ConfigMap` or `Secret`).
    pub fn as_str(self) -> &'static str {
        match self {
            DependencyKind::ConfigMap => "ConfigMap",
            DependencyKind::Secret => "Secret",
        }
    }
}

/// One referenced object. Field order = KUDO's sort order (group and version are equal for all).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dependency {
    /// Whether a ConfigMap or a Secret is referenced.
    pub kind: DependencyKind,
    /// Namespace of the referencing object (dependencies are always looked up there).
    pub namespace: String,
    /// `metadata.name` of the referenced ConfigMap or Secret.
    pub name: String,
}

/// The dependencies of `obj`'s pod templates, unsorted, in KUDO's collection order.
pub fn dependencies(obj: &Value) -> Vec<Dependency> {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut out = Vec::new();
    for path in ["/spec/template/spec", "/spec/jobTemplate/spec/template/spec"] {
        let Some(spec) = obj.pointer(path) else { continue };
        let dep = |kind, name: Option<&Value>| {
            name.and_then(Value::as_str).map(|n| Dependency {
                kind,
                namespace: ns.clone(),
                name: n.to_string(),
            })
        };
        for s in spec["imagePullSecrets"].as_array().into_iter().flatten() {
            out.extend(dep(DependencyKind::Secret, s.get("name")));
        }
        for v in spec["volumes"].as_array().into_iter().flatten() {
            if let Some(cm) = v.get("configMap") {
                out.extend(dep(DependencyKind::ConfigMap, cm.get("name")));
            }
            if let Some(sec) = v.get("secret") {
                out.extend(dep(DependencyKind::Secret, sec.get("secretName")));
            }
        }
    }
    out
}

/// Whether `obj` is the object `dep` names (`v1` ConfigMap/Secret of that namespace and name).
pub fn is_dependency(obj: &Value, dep: &Dependency) -> bool {
    obj["apiVersion"] == "v1"
        && obj["kind"] == dep.kind.as_str()
        && obj.pointer("/metadata/name").and_then(Value::as_str) == Some(dep.name.as_str())
        && obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            == dep.namespace
}

/// The version of a live object KUDO hashed: its `kudo.dev/last-applied-configuration` when it
/// has a parsable one, else the object itself.
pub fn for_hash(live: Value) -> Value {
    live.pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(live)
}

/// Why the dependencies hash cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// The dependency (rendered or live) is not a JSON object, so it cannot be sanitised.
    #[error("dependency is not an object")]
    NotAnObject,
    /// The sanitised object cannot be written as YAML (the writer's message).
    #[error("{0}")]
    Yaml(String),
    /// Hashing one dependency of an object failed; wraps the cause.
    #[error("error calculating hash for {name} of type {kind}: {source}")]
    Dependency {
        /// `metadata.name` of the dependency.
        name: String,
        /// Kind of the dependency (`ConfigMap` or `Secret`).
        kind: String,
        /// Why its hash could not be computed.
        source: Box<HashError>,
    },
    /// Computing the annotation for one rendered object of a task failed; wraps the cause.
    #[error("failed to add dependency hash to {object}: {source}")]
    Object {
        /// `metadata.name` of the rendered object whose pod template has the dependencies.
        object: String,
        /// Why the hash could not be computed.
        source: Box<HashError>,
    },
}

/// The sanitised YAML KUDO hashed for one dependency (see the module docs).
pub fn sanitized_yaml(obj: &Value) -> Result<String, HashError> {
    let mut o = obj.clone();
    let Some(root) = o.as_object_mut() else {
        return Err(HashError::NotAnObject);
    };
    root.insert("apiVersion".into(), json!(""));
    root.insert("kind".into(), json!(""));
    let meta = root.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        for k in [
            "namespace",
            "resourceVersion",
            "clusterName",
            "continue",
            "creationTimestamp",
            "generateName",
            "generation",
            "selfLink",
            "uid",
        ] {
            m.remove(k);
        }
        m.insert("ownerReferences".into(), json!([]));
        m.insert("finalizers".into(), json!([]));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        m.insert("managedFields".into(), json!([]));
        m.insert("remainingItemCount".into(), json!(0));
        m.insert("annotations".into(), json!({}));
    }
    kudo_template::yaml::to_yaml(&yaml_value(&o)).map_err(|e| HashError::Yaml(e.to_string()))
}

/// JSON as `sigs.k8s.io/yaml` hands it to yaml.v2: integers stay integers, other numbers floats.
fn yaml_value(v: &Value) -> kudo_template::Value {
    use kudo_template::Value as T;
    match v {
        Value::Null => T::Nil,
        Value::Bool(b) => T::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => T::Int(i),
            None => T::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => T::str(s.as_str()),
        Value::Array(a) => T::list(a.iter().map(yaml_value).collect()),
        Value::Object(o) => T::map(o.iter().map(|(k, v)| (k.clone(), yaml_value(v))).collect()),
    }
}

/// md5 of one dependency: zero when missing or marked [`SKIP_HASH_ANNOTATION`].
pub fn dependency_hash(obj: Option<&Value>) -> Result<[u8; 16], HashError> {
    let Some(obj) = obj else { return Ok([0; 16]) };
    let skip = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(SKIP_HASH_ANNOTATION));
    if skip {
        return Ok([0; 16]);
    }
    Ok(Md5::digest(sanitized_yaml(obj)?.as_bytes()).into())
}

/// The annotation value for `deps` (sorted here), each resolved by `resolve` (`None`: not found).
pub fn combined_hash(
    deps: &[Dependency],
    resolve: &mut dyn FnMut(&Dependency) -> Option<Value>,
) -> Result<String, HashError> {
    let mut deps = deps.to_vec();
    deps.sort();
    let mut total = Md5::new();
    for d in &deps {
        let h = dependency_hash(resolve(d).as_ref()).map_err(|e| HashError::Dependency {
            name: d.name.clone(),
            kind: d.kind.as_str().to_string(),
            source: Box::new(e),
        })?;
        total.update(h);
    }
    Ok(hex::encode(total.finalize()))
}

/// Pod-template annotation maps of `obj` (the same places the operator-version annotation goes).
fn template_annotations(obj: &mut Value) -> Vec<&mut Map<String, Value>> {
    let Some(path) = crate::enhance::pod_template_pointer(obj["kind"].as_str().unwrap_or("")) else {
        return Vec::new();
    };
    let Some(tpl) = obj.pointer_mut(path).and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    let meta = tpl.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let Some(meta) = meta.as_object_mut() else {
        return Vec::new();
    };
    let ann = meta.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    ann.as_object_mut().into_iter().collect()
}

/// Adds the dependencies hash to every object of one task (`task_objects`, enhanced) that has a
/// pod template referencing ConfigMaps or Secrets. A dependency rendered in the same task is
/// taken from `task_objects`; any other from `external` (`None`: not found → zero hash).
/// Returns the objects whose annotation was set, by index.
pub fn add_hashes(
    task_objects: &mut [Value],
    external: &mut dyn FnMut(&Dependency) -> Option<Value>,
) -> Result<Vec<usize>, HashError> {
    let mut hashes = Vec::new();
    for (i, obj) in task_objects.iter().enumerate() {
        let deps = dependencies(obj);
        if deps.is_empty() {
            continue;
        }
        let objs: &[Value] = task_objects;
        let mut resolve = |d: &Dependency| {
            objs.iter()
                .find(|o| is_dependency(o, d))
                .cloned()
                .or_else(|| external(d))
        };
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let hash = combined_hash(&deps, &mut resolve).map_err(|e| HashError::Object {
            object: name.to_string(),
            source: Box::new(e),
        })?;
        hashes.push((i, hash));
    }
    let mut set = Vec::new();
    for (i, hash) in hashes {
        for ann in template_annotations(&mut task_objects[i]) {
            ann.insert(DEPENDENCIES_HASH_ANNOTATION.into(), Value::String(hash.clone()));
            set.push(i);
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str, data: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "labels": {"heritage": "kudo"},
                         "annotations": {"kudo.dev/plan": "deploy"},
                         "ownerReferences": [{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": "i", "uid": "u"}]},
            "data": data
        })
    }

    fn sts(volumes: Value, pull: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"template": {"metadata": {"labels": {"app": "db"}},
                     "spec": {"imagePullSecrets": pull, "volumes": volumes,
                              "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "env-only"}}]}]}}}
        })
    }

    #[test]
    fn sanitised_yaml_is_what_apimachinery_setters_leave() {
        // Hand-written from the Unstructured setter semantics: emptied apiVersion/kind, empty
        // lists/maps set, zero counters set, volatile fields removed. The YAML form (literal
        // block, the quoted key "n" — a YAML 1.1 bool) was checked with the Go oracle's toYaml.
        let mut o = cm("conf", json!({"my.cnf": "[mysqld]\nport=3306\n", "n": "1"}));
        o["metadata"]["uid"] = json!("abc");
        o["metadata"]["resourceVersion"] = json!("7");
        o["metadata"]["creationTimestamp"] = json!("2020-01-01T00:00:00Z");
        let want = "apiVersion: \"\"\ndata:\n  my.cnf: |\n    [mysqld]\n    port=3306\n  \"n\": \"1\"\nkind: \"\"\nmetadata:\n  annotations: {}\n  deletionGracePeriodSeconds: 0\n  finalizers: []\n  labels:\n    heritage: kudo\n  managedFields: []\n  name: conf\n  ownerReferences: []\n  remainingItemCount: 0\n";
        assert_eq!(sanitized_yaml(&o).unwrap(), want);
        let digest: [u8; 16] = Md5::digest(want.as_bytes()).into();
        assert_eq!(dependency_hash(Some(&o)).unwrap(), digest);
    }

    #[test]
    fn references_pull_secrets_and_volumes_not_env() {
        let s = sts(
            json!([{"name": "a", "configMap": {"name": "conf"}}, {"name": "b", "secret": {"secretName": "tls"}},
                   {"name": "c", "emptyDir": {}}]),
            json!([{"name": "regcred"}]),
        );
        let deps = dependencies(&s);
        let names: Vec<(&str, &str)> = deps.iter().map(|d| (d.kind.as_str(), d.name.as_str())).collect();
        assert_eq!(
            names,
            [("Secret", "regcred"), ("ConfigMap", "conf"), ("Secret", "tls")]
        );
        assert!(deps.iter().all(|d| d.namespace == "ns"));
        let cron = json!({"kind": "CronJob", "metadata": {"namespace": "x"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"volumes": [{"configMap": {"name": "c"}}]}}}}}});
        assert_eq!(dependencies(&cron)[0].name, "c");
        assert!(dependencies(&cm("x", json!({}))).is_empty());
    }

    #[test]
    fn combined_hash_sorts_and_zeroes_missing_and_skipped() {
        let conf = cm("conf", json!({"k": "v"}));
        let mut skipped = cm("skipped", json!({"k": "v"}));
        skipped["metadata"]["annotations"][SKIP_HASH_ANNOTATION] = json!("true");
        let deps = vec![
            Dependency {
                kind: DependencyKind::Secret,
                namespace: "ns".into(),
                name: "missing".into(),
            },
            Dependency {
                kind: DependencyKind::ConfigMap,
                namespace: "ns".into(),
                name: "skipped".into(),
            },
            Dependency {
                kind: DependencyKind::ConfigMap,
                namespace: "ns".into(),
                name: "conf".into(),
            },
        ];
        let mut resolve = |d: &Dependency| match d.name.as_str() {
            "conf" => Some(conf.clone()),
            "skipped" => Some(skipped.clone()),
            _ => None,
        };
        let got = combined_hash(&deps, &mut resolve).unwrap();
        // Sorted: ConfigMap conf, ConfigMap skipped (zero), Secret missing (zero).
        let mut want = Md5::new();
        want.update(dependency_hash(Some(&conf)).unwrap());
        want.update([0u8; 16]);
        want.update([0u8; 16]);
        assert_eq!(got, hex::encode(want.finalize()));
    }

    #[test]
    fn add_hashes_prefers_the_task_object_and_changes_only_with_content() {
        let s = sts(
            json!([{"name": "a", "configMap": {"name": "db-conf"}}]),
            json!([]),
        );
        let run = |data: &str, live: Option<Value>| {
            let mut objs = vec![cm("db-conf", json!({"k": data})), s.clone()];
            let live = live.clone();
            let set = add_hashes(&mut objs, &mut |_| live.clone()).unwrap();
            assert_eq!(set, [1]);
            objs[1]["spec"]["template"]["metadata"]["annotations"][DEPENDENCIES_HASH_ANNOTATION]
                .as_str()
                .unwrap()
                .to_string()
        };
        let a = run("1", None);
        // The live object is ignored when the task renders the ConfigMap itself.
        assert_eq!(a, run("1", Some(cm("db-conf", json!({"k": "other"})))));
        assert_ne!(a, run("2", None));
        // Only the StatefulSet's own metadata changes nothing (labels on the template stay).
        let mut only_sts = vec![s.clone()];
        add_hashes(&mut only_sts, &mut |_| Some(cm("db-conf", json!({"k": "1"})))).unwrap();
        assert_eq!(
            only_sts[0]["spec"]["template"]["metadata"]["annotations"][DEPENDENCIES_HASH_ANNOTATION],
            json!(a),
            "a dependency read from the cluster hashes like the one rendered in the task"
        );
        // Objects without dependencies get no annotation.
        let mut plain = vec![sts(json!([]), json!([]))];
        assert!(add_hashes(&mut plain, &mut |_| None).unwrap().is_empty());
        assert!(
            plain[0]["spec"]["template"]["metadata"]
                .get("annotations")
                .is_none()
        );
    }

    #[test]
    fn last_applied_configuration_wins_over_the_live_object() {
        let applied = cm("c", json!({"k": "v"}));
        let mut live = applied.clone();
        live["data"]["extra"] = json!("server side");
        live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = json!(applied.to_string());
        assert_eq!(for_hash(live.clone())["data"], json!({"k": "v"}));
        live["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(LAST_APPLIED_ANNOTATION);
        assert_eq!(for_hash(live)["data"]["extra"], "server side");
    }
}
