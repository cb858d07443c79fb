//! Reading an Instance's revision history (the ControllerRevisions the manager records for every
//! plan run, see [`kudo_engine::revision`]): shared by `history`, `rollback`, rollouts and the
//! manager's own bookkeeping.

use kube::api::{Api, DynamicObject, ListParams};
use kudo_engine::revision::{self, Revision};
use kudo_kube::discovery::known_resource;

/// The revisions of Instance `ns/name` with uid `uid`, oldest first (selected by the instance
/// label, then by owner uid).
pub async fn list(
    client: &kube::Client,
    ns: &str,
    name: &str,
    uid: &str,
) -> Result<Vec<Revision>, kube::Error> {
    let selector = format!("{}={}", kudo_api::labels::INSTANCE, revision::label_value(name));
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &known_resource("apps", "ControllerRevision"));
    let items = api.list(&ListParams::default().labels(&selector)).await?;
    let values: Vec<serde_json::Value> = items
        .items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    Ok(revision::history(&values, uid))
}

/// The revisions of `inst` (in its own namespace).
pub async fn of(client: &kube::Client, inst: &kudo_api::Instance) -> Result<Vec<Revision>, kube::Error> {
    let uid = inst
        .metadata
        .other
        .get("uid")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let ns = inst.metadata.namespace.as_deref().unwrap_or_default();
    list(client, ns, &inst.metadata.name, uid).await
}
