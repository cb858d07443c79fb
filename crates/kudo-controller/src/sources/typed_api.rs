//! The typed API of a package a source stores: the CRD and ClusterRoles that `install` writes
//! (`kudo_package::typed_api`), refused — before anything is written — when another operator or
//! tool owns the CRD's name, or when objects of the kind on the cluster would not be valid under the
//! new schema.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kudo_api::OperatorVersion;
use kudo_engine::source::{Failure, FailureKind};
use kudo_package::typed_api::{self, Ownership};
use serde_json::Value;

use super::{FIELD_MANAGER, SourceError};

fn crds(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions"),
    )
}

/// Whether the OperatorVersion's typed API may be written (`Ok(Ok)` also without one).
pub(super) async fn check(
    client: &kube::Client,
    ov: &OperatorVersion,
) -> Result<Result<(), Failure>, SourceError> {
    let (Some(crd), Some(api)) = (typed_api::crd(ov), &ov.spec.api) else {
        return Ok(Ok(()));
    };
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let existing = crds(client)
        .get_opt(&name)
        .await?
        .map(serde_json::to_value)
        .transpose()?;
    let conflict = |m: String| Ok(Err(Failure::new(FailureKind::Conflict, m)));
    match typed_api::ownership(existing.as_ref(), &ov.spec.operator.name) {
        Ownership::Foreign(owner) => {
            return conflict(format!(
                "the typed API's CRD {name} exists and belongs to {owner}"
            ));
        }
        Ownership::Absent => return Ok(Ok(())),
        Ownership::Ours => {}
    }
    let gvk = GroupVersionKind::gvk(&api.group, api.version(), &api.kind);
    let objects = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, &api.plural()),
    );
    let items = match objects.list(&ListParams::default()).await {
        Ok(l) => l.items,
        // Another served version: nothing to compare at this one.
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let items: Vec<Value> = items
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let broken = typed_api::broken_objects(api, &crd, &items);
    if broken.is_empty() {
        return Ok(Ok(()));
    }
    conflict(format!(
        "the typed API of operator version {} would break existing objects: {}",
        ov.metadata.name,
        broken.join("; ")
    ))
}

/// Writes the typed API's CRD (waiting until it is Established) and its ClusterRoles.
pub(super) async fn apply(client: &kube::Client, ov: &OperatorVersion) -> Result<(), SourceError> {
    let Some(crd) = typed_api::crd(ov) else {
        return Ok(());
    };
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let api = crds(client);
    api.patch(&name, &params, &Patch::Apply(&crd)).await?;
    for _ in 0..60 {
        let got = api.get(&name).await?;
        let established = got.data["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
        if established {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let roles: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    for role in typed_api::cluster_roles(ov) {
        let role_name = role["metadata"]["name"].as_str().unwrap_or_default().to_string();
        roles.patch(&role_name, &params, &Patch::Apply(&role)).await?;
    }
    Ok(())
}
