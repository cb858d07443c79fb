//! Reading an Instance's revision history (the ControllerRevisions the manager records for every
//! plan run, see [`kudo_engine::revision`]): shared by `history`, `rollback`, rollouts and the
//! manager's own bookkeeping.

use kube::api::{Api, DynamicObject, ListParams};
use kudo_engine::revision::{self, Revision};
use kudo_kube::discovery::known_resource;

/// The ControllerRevisions API of namespace `ns` and the label selector of Instance `name`'s
/// revisions (which [`kudo_engine::revision::history`] then narrows to the Instance's uid).
pub fn api(client: &kube::Client, ns: &str, name: &str) -> (Api<DynamicObject>, String) {
    let selector = format!("{}={}", kudo_api::labels::INSTANCE, revision::label_value(name));
    (Api::namespaced_with(client.clone(), ns, &resource()), selector)
}

/// apps/v1 ControllerRevision, the kind revisions are recorded as.
pub fn resource() -> kube::discovery::ApiResource {
    known_resource("apps", "ControllerRevision")
}

/// The revisions of Instance `ns/name` with uid `uid`, oldest first (selected by the instance
/// label, then by owner uid).
pub async fn list(
    client: &kube::Client,
    ns: &str,
    name: &str,
    uid: &str,
) -> Result<Vec<Revision>, kube::Error> {
    let (api, selector) = api(client, ns, name);
    let items = api.list(&ListParams::default().labels(&selector)).await?;
    Ok(of_objects(&items.items, uid))
}

/// The revisions among `objects` (ControllerRevisions) of the Instance with uid `uid`, oldest
/// first.
pub fn of_objects(objects: &[DynamicObject], uid: &str) -> Vec<Revision> {
    let values: Vec<serde_json::Value> = objects
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    revision::history(&values, uid)
}

/// The revisions of `inst` (in its own namespace).
pub async fn of(client: &kube::Client, inst: &kudo_api::Instance) -> Result<Vec<Revision>, kube::Error> {
    let ns = inst.metadata.namespace.as_deref().unwrap_or_default();
    list(client, ns, &inst.metadata.name, inst.uid()).await
}
