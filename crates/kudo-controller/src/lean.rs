//! Objects from the API server decoded in one pass, without managedFields.
//!
//! kube's `DynamicObject` derives its decoder with two `#[serde(flatten)]` fields, so serde first
//! buffers the whole object into an intermediate tree and then decodes the metadata and the rest
//! from it; every object also arrives with its managedFields, which the caches drop at once
//! (crate::watches). On a real API server those are a large part of each event: decoding watch
//! events was 12 % of the manager's samples in the real-cluster scale bench (issue 28 item 4).
//! [`Lean`] decodes the same JSON straight into a `DynamicObject`: the type fields and the body
//! in one pass, managedFields skipped unparsed. No crate offers this (kube decodes into `K` with
//! its derived `Deserialize`), so the watches, the Instance reads and writes and the applies use
//! `Lean` as their `K` (no reader of their answers looks at managedFields) and unwrap it.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use kube::core::{DynamicResourceScope, Resource};
use kube::runtime::watcher;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// A `DynamicObject` decoded without managedFields (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Lean(pub DynamicObject);

impl Lean {
    /// The watcher's event with the decoded object unwrapped.
    pub fn unwrap_event(ev: watcher::Event<Lean>) -> watcher::Event<DynamicObject> {
        match ev {
            watcher::Event::Apply(o) => watcher::Event::Apply(o.0),
            watcher::Event::Delete(o) => watcher::Event::Delete(o.0),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitApply(o) => watcher::Event::InitApply(o.0),
            watcher::Event::InitDone => watcher::Event::InitDone,
        }
    }
}

impl Resource for Lean {
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

impl Serialize for Lean {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Lean {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Lean, D::Error> {
        d.deserialize_map(ObjectVisitor).map(Lean)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = DynamicObject;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DynamicObject, A::Error> {
        let (mut api_version, mut kind) = (None, None);
        let mut metadata = ObjectMeta::default();
        let mut data = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = map.next_value::<LeanMeta>()?.0,
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

/// Metadata without managedFields: the other fields are gathered as JSON and decoded as
/// `ObjectMeta` (a small second pass; managedFields is most of a metadata block).
struct LeanMeta(ObjectMeta);

impl<'de> Deserialize<'de> for LeanMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LeanMeta, D::Error> {
        d.deserialize_map(MetaVisitor)
    }
}

struct MetaVisitor;

impl<'de> Visitor<'de> for MetaVisitor {
    type Value = LeanMeta;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("object metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LeanMeta, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "managedFields" {
                map.next_value::<IgnoredAny>()?;
            } else {
                fields.insert(key, map.next_value::<Value>()?);
            }
        }
        ObjectMeta::deserialize(Value::Object(fields))
            .map(LeanMeta)
            .map_err(de::Error::custom)
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
}
