//! The `kudo.dev/v1beta1` kinds the manager reads and writes as dynamic objects, and how a child
//! object names its Instance.

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

/// The `kudo.dev/v1beta1` resources as dynamic API resources (the kudo-api types are plain serde
/// structs, converted with serde_json).
pub(crate) fn instance_resource() -> ApiResource {
    // Every watch event of a child names its Instance with one: looked up once.
    static INSTANCE: std::sync::OnceLock<ApiResource> = std::sync::OnceLock::new();
    INSTANCE
        .get_or_init(|| kudo_kube::known_resource(kudo_api::GROUP, "Instance"))
        .clone()
}

pub(crate) fn operator_version_resource() -> ApiResource {
    kudo_kube::known_resource(kudo_api::GROUP, "OperatorVersion")
}

/// Maps a child object back to its Instance through the `kudo.dev/instance` label (namespaced
/// children live in the Instance's namespace).
pub(crate) fn owner_of<K: Resource>(obj: &K) -> Option<ObjectRef<DynamicObject>> {
    let name = obj.labels().get(kudo_api::labels::INSTANCE)?.clone();
    let ns = obj.namespace()?;
    Some(ObjectRef::new_with(&name, instance_resource()).within(&ns))
}
