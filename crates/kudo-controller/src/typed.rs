//! Typed APIs on the manager's side (a kudo-rs extension): every OperatorVersion with an `api:`
//! section gets a controller for its kind, which keeps an Instance of the same name and namespace for each
//! typed object (owned by it, so deleting the object deletes the Instance and runs its cleanup) and
//! mirrors that Instance's run into the object's `status`. The decisions are
//! [`kudo_engine::typed`]'s; this module reads and writes.
//!
//! kube-runtime's `Controller` per kind, not the Instance queue: a typed object is not an Instance,
//! and the `owns` relation (Instances labelled for the kind) is exactly the status mirror's trigger.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, watcher};
use kudo_api::{Instance, OperatorVersion, TypedApi};
use kudo_engine::typed::{
    InstanceAction, TYPED_LABEL, choose_operator_version, instance_action, status_patch,
};

use crate::gate::ShardGate;
use crate::incarnation::Incarnation;
use crate::resources::{instance_resource, operator_version_resource};

/// Field manager of the manager's writes to typed objects and their Instances.
const FIELD_MANAGER: &str = "kudo-manager";

#[derive(Debug, thiserror::Error)]
pub(crate) enum TypedError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("malformed object: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("no OperatorVersion serving {0} in namespace {1}")]
    NoOperatorVersion(String, String),
}

/// What every reconcile of one typed kind shares.
struct Kind {
    client: kube::Client,
    api: TypedApi,
    /// A typed object and its Instance share namespace and name, so they share a shard: only the
    /// replica acting on the Instance writes either (crate::shard).
    shards: Arc<ShardGate>,
}

/// How soon a typed object of a shard held elsewhere is looked at again (it may come here).
const OTHER_SHARD_RECHECK: Duration = Duration::from_secs(15);

/// The typed APIs' controllers of an incarnation: they stop with it.
pub(crate) fn start(inc: &mut Incarnation) -> BoxFuture<'static, ()> {
    let run = run(
        inc.client.clone(),
        inc.config.namespace.clone(),
        inc.sharding.gate.clone(),
    );
    inc.until_stopped(run)
}

/// Watches OperatorVersions (in the manager's scope) and starts one controller per typed kind
/// they declare, for as long as this future runs (the controllers stop with it).
async fn run(client: kube::Client, namespace: Option<String>, shards: Arc<ShardGate>) {
    let ovs = scoped(&client, &operator_version_resource(), namespace.as_deref());
    let mut started = HashSet::new();
    let mut kinds = tokio::task::JoinSet::new();
    let mut events = std::pin::pin!(
        watcher(ovs, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while let Some(ev) = events.next().await {
        let Ok(obj) = ev else { continue };
        let Ok(ov) =
            serde_json::from_value::<OperatorVersion>(serde_json::to_value(&obj).unwrap_or_default())
        else {
            continue;
        };
        let Some(api) = ov.spec.api else { continue };
        if started.insert(api.crd_name()) {
            tracing::info!(crd = %api.crd_name(), "watching a typed API");
            kinds.spawn(run_kind(client.clone(), api, namespace.clone(), shards.clone()));
        }
    }
}

fn scoped(client: &kube::Client, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

fn resource(api: &TypedApi) -> ApiResource {
    let gvk = GroupVersionKind::gvk(&api.group, api.version(), &api.kind);
    ApiResource::from_gvk_with_plural(&gvk, &api.plural())
}

async fn run_kind(client: kube::Client, api: TypedApi, namespace: Option<String>, shards: Arc<ShardGate>) {
    let ar = resource(&api);
    let objects = scoped(&client, &ar, namespace.as_deref());
    let instances = scoped(&client, &instance_resource(), namespace.as_deref());
    let owned = watcher::Config::default().labels(&format!("{TYPED_LABEL}={}", api.crd_name()));
    Controller::new_with(objects, watcher::Config::default(), ar)
        .owns_with(instances, instance_resource(), owned)
        .run(reconcile, error_policy, Arc::new(Kind { client, api, shards }))
        .for_each(|_| futures::future::ready(()))
        .await;
}

fn error_policy(obj: Arc<DynamicObject>, err: &TypedError, _: Arc<Kind>) -> Action {
    tracing::warn!(object = %obj.name_any(), error = %err, "typed object not synced");
    Action::requeue(Duration::from_secs(15))
}

/// One typed object: its Instance created or brought in step, then its status mirrored.
async fn reconcile(obj: Arc<DynamicObject>, kind: Arc<Kind>) -> Result<Action, TypedError> {
    if obj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    if !kind.shards.holds(&ns, &name) {
        return Ok(Action::requeue(OTHER_SHARD_RECHECK));
    }
    let instances: Api<DynamicObject> = Api::namespaced_with(kind.client.clone(), &ns, &instance_resource());
    let existing = match instances.get_opt(&name).await? {
        Some(o) => Some(serde_json::from_value::<Instance>(serde_json::to_value(o)?)?),
        None => None,
    };
    let ov = operator_version(&kind, &ns, existing.as_ref()).await?;
    let json = serde_json::to_value(&*obj)?;
    let action = instance_action(&json, &ov, existing.as_ref());
    match &action {
        InstanceAction::Create(inst) => {
            let inst: DynamicObject = serde_json::from_value(inst.clone())?;
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            instances.create(&pp, &inst).await?;
            tracing::info!(namespace = %ns, instance = %name, "instance created for a typed object");
        }
        InstanceAction::Patch(p) => {
            instances
                .patch(&name, &PatchParams::default(), &Patch::Merge(p))
                .await?;
        }
        InstanceAction::Conflict(msg) => tracing::warn!(namespace = %ns, object = %name, "{msg}"),
        InstanceAction::Nothing => {}
    }
    // Written in the reconcile that creates or patches the Instance too: until then the object
    // has no status, which kstatus reads as ready.
    if let Some(patch) = status_patch(&json, existing.as_ref(), &action, crate::reconcile::now()) {
        let objects: Api<DynamicObject> =
            Api::namespaced_with(kind.client.clone(), &ns, &resource(&kind.api));
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        objects.patch_status(&name, &pp, &Patch::Merge(&patch)).await?;
    }
    Ok(Action::await_change())
}

/// The existing Instance's OperatorVersion, or for a new one the newest serving this kind.
async fn operator_version(
    kind: &Kind,
    ns: &str,
    existing: Option<&Instance>,
) -> Result<OperatorVersion, TypedError> {
    let ovs: Api<DynamicObject> = Api::namespaced_with(kind.client.clone(), ns, &operator_version_resource());
    let decode = |o: DynamicObject| serde_json::from_value::<OperatorVersion>(serde_json::to_value(o)?);
    if let Some(inst) = existing
        && let Some(o) = ovs.get_opt(&inst.spec.operator_version.name).await?
    {
        return Ok(decode(o)?);
    }
    let all: Vec<OperatorVersion> = ovs
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|o| decode(o).ok())
        .collect();
    choose_operator_version(&all, &kind.api.api_version(), &kind.api.kind)
        .cloned()
        .ok_or_else(|| TypedError::NoOperatorVersion(kind.api.crd_name(), ns.to_string()))
}
