//! Objects from the API server decoded in one pass, without managedFields.
//!
//! kube's `DynamicObject` derives its decoder with two `#[serde(flatten)]` fields, so serde first
//! buffers the whole object into an intermediate tree and then decodes the metadata and the rest
//! from it; every object also arrives with its managedFields, which the caches drop at once
//! (crate::watches). On a real API server those are a large part of each event: decoding watch
//! events was 12 % of the manager's samples in the real-cluster scale bench.
//! [`Lean`] decodes the same JSON straight into a `DynamicObject`: the type fields, the metadata
//! and the body in one pass, managedFields skipped unparsed. No crate offers this (kube decodes
//! into `K` with its derived `Deserialize`), so the watches, the Instance reads and writes and the
//! applies use `Lean` as their `K` (no reader of their answers looks at managedFields) and unwrap
//! it. `Lean<Child>`, the watched children's shape, also skips unparsed what the child cache
//! would drop of an object no plan applied ([`crate::cache::unapplied_keep`]): a Pod's spec, most
//! of its status (half of the watch decoding in the `scale 1000` bench went to metadata and
//! bodies thrown away right after).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use kube::core::{DynamicResourceScope, Resource};
use kube::runtime::watcher;
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::cache::{Keep, owned_by_instance, unapplied_keep};

/// How much of an object's body [`Lean`] keeps.
pub(crate) trait Shape: Clone + fmt::Debug + Send + Sync + 'static {
    /// Whether the body of an object no plan applied is cut to what the child cache keeps.
    const CHILD: bool;
}

/// Everything but managedFields.
#[derive(Clone, Debug)]
pub(crate) struct Whole;

impl Shape for Whole {
    const CHILD: bool = false;
}

/// A watched child: an object no plan applied keeps only what [`crate::cache::slim`]
/// keeps, when its metadata comes before its body (it does from kube-apiserver and ours);
/// otherwise the whole body, which the cache then slims.
#[derive(Clone, Debug)]
pub(crate) struct Child;

impl Shape for Child {
    const CHILD: bool = true;
}

/// A `DynamicObject` decoded without managedFields (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Lean<S: Shape = Whole>(pub DynamicObject, PhantomData<S>);

impl<S: Shape> Lean<S> {
    /// The watcher's event with the decoded object unwrapped.
    pub fn unwrap_event(ev: watcher::Event<Lean<S>>) -> watcher::Event<DynamicObject> {
        match ev {
            watcher::Event::Apply(o) => watcher::Event::Apply(o.0),
            watcher::Event::Delete(o) => watcher::Event::Delete(o.0),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitApply(o) => watcher::Event::InitApply(o.0),
            watcher::Event::InitDone => watcher::Event::InitDone,
        }
    }
}

impl<S: Shape> Resource for Lean<S> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::kind(dt)
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::group(dt)
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::version(dt)
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::api_version(dt)
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        DynamicObject::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

impl<S: Shape> Serialize for Lean<S> {
    fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        self.0.serialize(s)
    }
}

impl<'de, S: Shape> Deserialize<'de> for Lean<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Lean<S>, D::Error> {
        d.deserialize_map(ObjectVisitor::<S>(PhantomData))
            .map(|o| Lean(o, PhantomData))
    }
}

struct ObjectVisitor<S>(PhantomData<S>);

impl<'de, S: Shape> Visitor<'de> for ObjectVisitor<S> {
    type Value = DynamicObject;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DynamicObject, A::Error> {
        let (mut api_version, mut kind) = (None, None);
        let mut metadata = ObjectMeta::default();
        // Set once the metadata shows a child no plan applied (`Lean<Child>` only).
        let mut unapplied = false;
        let mut data = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => {
                    metadata = map.next_value::<LeanMeta>()?.into_meta();
                    unapplied = S::CHILD && !owned_by_instance(&metadata);
                }
                _ if unapplied => match unapplied_keep(kind.as_deref(), &key) {
                    Keep::All => {
                        data.insert(key, map.next_value::<Value>()?);
                    }
                    Keep::Only(fields) => {
                        data.insert(key, map.next_value_seed(Only(fields))?);
                    }
                    Keep::Nothing => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
                _ => {
                    data.insert(key, map.next_value::<Value>()?);
                }
            }
        }
        let types = match (api_version, kind) {
            (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        };
        Ok(DynamicObject {
            types,
            metadata,
            data: Value::Object(data),
        })
    }
}

/// An object's field decoded with only the named keys (the others skipped unparsed); anything
/// but an object is kept whole.
struct Only(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Only {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Only {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.0.contains(&key.as_str()) {
                kept.insert(key, map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Value::deserialize(de::value::SeqAccessDeserializer::new(seq))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
}

/// `ObjectMeta`'s fields but managedFields, decoded in one pass: an unknown field (managedFields
/// among them) is skipped unparsed.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl LeanMeta {
    fn into_meta(self) -> ObjectMeta {
        ObjectMeta {
            annotations: self.annotations,
            creation_timestamp: self.creation_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            deletion_timestamp: self.deletion_timestamp,
            finalizers: self.finalizers,
            generate_name: self.generate_name,
            generation: self.generation,
            labels: self.labels,
            managed_fields: None,
            name: self.name,
            namespace: self.namespace,
            owner_references: self.owner_references,
            resource_version: self.resource_version,
            self_link: self.self_link,
            uid: self.uid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_like_dynamic_object_without_managed_fields() {
        let body = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "ns", "resourceVersion": "7", "generation": 2,
                "labels": {"heritage": "kudo"},
                "ownerReferences": [{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
                    "name": "i", "uid": "u1", "controller": true}],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}]
            },
            "spec": {"replicas": 3},
            "status": {"readyReplicas": 1}
        });
        let text = serde_json::to_string(&body).unwrap();
        let lean: Lean = serde_json::from_str(&text).unwrap();
        let mut full: DynamicObject = serde_json::from_str(&text).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        assert_eq!(lean.0, full);
    }

    #[test]
    fn an_object_without_type_fields_has_none() {
        let lean: Lean = serde_json::from_str(r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#).unwrap();
        assert_eq!(lean.0.types, None);
        assert_eq!(lean.0.metadata.name.as_deref(), Some("a"));
        assert_eq!(lean.0.data, json!({"data": {"k": "v"}}));
    }

    #[test]
    fn malformed_metadata_is_an_error_not_a_panic() {
        let err = serde_json::from_str::<Lean>(r#"{"metadata":{"name":5}}"#).unwrap_err();
        assert!(err.to_string().contains("string"), "{err}");
    }

    #[test]
    fn a_child_no_plan_applied_is_decoded_as_the_cache_keeps_it() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u",
                "labels": {"heritage": "kudo", "kudo.dev/instance": "i", "app": "x"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "r", "controller": true}],
                "managedFields": [{"manager": "kubelet"}]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "n"},
            "status": {"phase": "Running", "podIP": "10.0.0.2", "hostIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "ready": false, "image": "nginx",
                    "state": {"waiting": {"reason": "ErrImagePull", "message": "no"}}}]},
            "extra": {"big": [1, 2, 3]}
        });
        let text = serde_json::to_string(&pod).unwrap();
        let child: Lean<Child> = serde_json::from_str(&text).unwrap();
        assert_eq!(
            child.0.data["spec"],
            json!({}),
            "the pod spec is skipped unparsed"
        );
        assert!(child.0.data.get("extra").is_none());
        assert!(child.0.data["status"].get("podIP").is_none());
        let (mut slim_child, mut slim_whole) = (child.0, serde_json::from_str::<Lean>(&text).unwrap().0);
        crate::cache::slim("Pod", &mut slim_child);
        crate::cache::slim("Pod", &mut slim_whole);
        assert_eq!(slim_child, slim_whole);
    }

    #[test]
    fn a_child_a_plan_applied_is_decoded_whole() {
        let deploy = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns",
                "ownerReferences": [{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": "i",
                    "uid": "iu", "controller": true}]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"replicas": 2}
        });
        let text = serde_json::to_string(&deploy).unwrap();
        let child: Lean<Child> = serde_json::from_str(&text).unwrap();
        assert_eq!(child.0, serde_json::from_str::<Lean>(&text).unwrap().0);
    }
}
