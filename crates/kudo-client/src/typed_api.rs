//! The typed API of an operator on the cluster: `install` and `upgrade` create or
//! update the CRD `kudo_package::typed_api::crd` makes from the OperatorVersion, never one that
//! something else owns, and refuse a new schema that existing typed objects would break, before
//! anything is written.

use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kudo_api::OperatorVersion;
use kudo_package::typed_api::{self, Ownership};
use serde_json::Value;

use crate::cluster::{Cluster, FIELD_MANAGER};
use crate::{Error, Event, Progress, Result};

/// What [`check`] found: the CRD to write, if the OperatorVersion declares one.
pub struct Planned {
    crd: Value,
    existed: bool,
}

/// The typed API's CRD as written: its name and whether it existed before (`configured` rather
/// than `created`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedCrd {
    /// The CRD's name (`<plural>.<group>`).
    pub name: String,
    /// Whether the CRD existed and was updated.
    pub existed: bool,
}

fn crd_api(cluster: &Cluster) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions");
    Api::all_with(cluster.client.clone(), &ar)
}

/// Reads the CRD of the OperatorVersion's typed API and decides whether it may be written: refused
/// when another operator or tool owns that name, or when existing typed objects would not be valid
/// under the new schema (unless `allow_breaking`). Writes nothing.
pub async fn check(cluster: &Cluster, ov: &OperatorVersion, allow_breaking: bool) -> Result<Option<Planned>> {
    let Some(crd) = typed_api::crd(ov) else {
        return Ok(None);
    };
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let existing = crd_api(cluster).get_opt(&name).await?;
    let existing = existing.map(serde_json::to_value).transpose()?;
    match typed_api::ownership(existing.as_ref(), &ov.spec.operator.name) {
        Ownership::Foreign(owner) => return Err(Error::ForeignCrd { name, owner }),
        Ownership::Absent => return Ok(Some(Planned { crd, existed: false })),
        Ownership::Ours => {}
    }
    if !allow_breaking {
        let broken = breaking(cluster, ov, &crd).await?;
        if !broken.is_empty() {
            return Err(Error::BreakingTypedApi {
                operator_version: ov.metadata.name.clone(),
                objects: broken,
            });
        }
    }
    Ok(Some(Planned { crd, existed: true }))
}

/// Every existing typed object whose spec the new schema would refuse, as `KIND NS/NAME: field error`.
async fn breaking(cluster: &Cluster, ov: &OperatorVersion, crd: &Value) -> Result<Vec<String>> {
    let Some(api) = &ov.spec.api else {
        return Ok(Vec::new());
    };
    let gvk = GroupVersionKind::gvk(&api.group, api.version(), &api.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &api.plural());
    let objects = match Api::<DynamicObject>::all_with(cluster.client.clone(), &ar)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        // The served version changed (v1 → v2): the old objects are read at their own version by
        // the API server's conversion, which we do not set up; nothing to compare at this version.
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let objects: Vec<Value> = objects
        .into_iter()
        .map(serde_json::to_value)
        .collect::<std::result::Result<_, _>>()?;
    Ok(typed_api::broken_objects(api, crd, &objects))
}

/// Creates or updates the CRD [`check`] planned and its ClusterRoles (server-side apply as
/// `field_manager`: the CLI's [`FIELD_MANAGER`], or the manager's when a package source stores the
/// package), reporting the CRD as soon as it is written, and returns once the CRD is Established.
///
/// Generic over the reporter so that a caller reporting to nobody ([`crate::Quiet`]) gets a `Send`
/// future (the manager's controllers need one; `&mut dyn Progress` is not `Send`).
pub async fn apply<P: Progress + ?Sized>(
    cluster: &Cluster,
    ov: &OperatorVersion,
    planned: Planned,
    field_manager: &str,
    progress: &mut P,
) -> Result<AppliedCrd> {
    let name = planned.crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let params = PatchParams::apply(field_manager).force();
    crd_api(cluster)
        .patch(&name, &params, &Patch::Apply(&planned.crd))
        .await?;
    progress.report(Event::CrdApplied {
        name: &name,
        existed: planned.existed,
    })?;
    established(cluster, &name).await?;
    let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let roles: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &ApiResource::from_gvk(&gvk));
    for role in typed_api::cluster_roles(ov) {
        let role_name = role["metadata"]["name"].as_str().unwrap_or_default().to_string();
        roles.patch(&role_name, &params, &Patch::Apply(&role)).await?;
    }
    Ok(AppliedCrd {
        name,
        existed: planned.existed,
    })
}

/// The typed object that owns `instance` (controller ownerReference of the OperatorVersion's typed
/// kind): its API in the Instance's namespace and its name.
fn owner(
    cluster: &Cluster,
    instance: &kudo_api::Instance,
    ov: &OperatorVersion,
) -> Option<(Api<DynamicObject>, String)> {
    let api = ov.spec.api.as_ref()?;
    let name = owner_name(instance, ov)?;
    let gvk = GroupVersionKind::gvk(&api.group, api.version(), &api.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &api.plural());
    let objects = Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &ar);
    Some((objects, name))
}

/// The name of the typed object (of `ov`'s typed kind) that owns `instance`, if one does: its
/// parameters are changed through that object.
pub fn owner_name(instance: &kudo_api::Instance, ov: &OperatorVersion) -> Option<String> {
    let api = ov.spec.api.as_ref()?;
    let refs = instance.metadata.other.get("ownerReferences")?.as_array()?;
    let owner = refs
        .iter()
        .find(|r| r["controller"] == true && r["kind"] == api.kind.as_str())?;
    Some(owner["name"].as_str()?.to_string())
}

/// `kubectl kudo update` of an Instance that a typed object owns changes the typed object (its
/// source of truth; the manager carries the change to the Instance), not the Instance behind its
/// back. Returns false, writing nothing, for an Instance no typed object owns.
pub async fn update_owner(
    cluster: &Cluster,
    instance: &kudo_api::Instance,
    ov: &OperatorVersion,
    plain: &std::collections::BTreeMap<String, String>,
    sources: &Value,
) -> Result<bool> {
    let Some((objects, name)) = owner(cluster, instance, ov) else {
        return Ok(false);
    };
    let mut spec = typed_api::spec_fields(ov, plain).map_err(Error::TypedSpec)?;
    if sources.as_object().is_some_and(|m| !m.is_empty()) {
        spec.insert("parameterSources".into(), sources.clone());
    }
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    objects
        .patch(&name, &params, &Patch::Merge(&serde_json::json!({"spec": spec})))
        .await?;
    Ok(true)
}

/// `kubectl kudo uninstall` of an Instance that a typed object owns deletes the typed object (the
/// manager would otherwise make the Instance again); the garbage collector then deletes the
/// Instance, whose cleanup plan runs. Returns the object's name, `None` when no typed object owns it.
pub async fn delete_owner(
    cluster: &Cluster,
    instance: &kudo_api::Instance,
    ov: &OperatorVersion,
) -> Result<Option<String>> {
    let Some((objects, name)) = owner(cluster, instance, ov) else {
        return Ok(None);
    };
    objects
        .delete(&name, &kube::api::DeleteParams::background())
        .await?;
    Ok(Some(name))
}

/// Waits (30 s at most) until the API server serves the CRD: objects applied right after `install`
/// would otherwise meet "no matches for kind".
async fn established(cluster: &Cluster, name: &str) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let crd = crd_api(cluster).get(name).await?;
        let ok = crd.data["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
        if ok {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::CrdNotEstablished {
                name: name.to_string(),
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
