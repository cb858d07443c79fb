//! The manager's reconcile, one at a time, without watches or a work queue: a test steps an
//! Instance through its plans (`reconcile`, change the world, `reconcile` again) and looks at
//! what each reconcile wrote. With an in-process API server
//! (`kudo_apiserver::ApiServer::in_process`) a reconcile is a few function calls, so whole
//! reconciles are table-tested in milliseconds (`tests/e2e/steps.rs`).
//!
//! Nothing here decides anything: [`Stepper::reconcile`] runs what the controller's queue runs
//! for each Instance it takes, over a [`Context`] built as the controller builds it. Caches start
//! empty and are never fed, so every read goes to the server (the manager falls back to that
//! whenever a cache is not synced).

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::reflector::store::Writer;

use crate::cache::Caches;
use crate::config::ControllerConfig;
use crate::context::{Context, Watched};
use crate::gate::ShardGate;
use crate::metrics::Metrics;
use crate::reconcile::{self, ReconcileError};
use crate::resources::{instance_resource, operator_version_resource};
use crate::{autopilot, metrics};

/// Runs single reconciles of Instances (see the module docs).
///
/// ```
/// use kube::api::{Api, ApiResource, DynamicObject, PostParams};
/// use kudo_controller::{ControllerConfig, Stepper};
/// use kudo_package::resources::{ConvertOptions, to_resources};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // An in-process API server: no socket, the embedded server's own semantics.
/// let server = kudo_apiserver::ApiServer::in_process(Default::default())?;
/// let client = kube::Client::new(server.service(), "default");
/// kudo_controller::install_crds(&client, "doc", std::time::Duration::from_secs(10)).await?;
///
/// // What `kubectl kudo install examples/first-operator` creates.
/// let package = kudo_package::read_path(std::path::Path::new("../../examples/first-operator"))?;
/// let res = to_resources(&package, &ConvertOptions::default())?;
/// for object in [
///     serde_json::to_value(&res.operator)?,
///     serde_json::to_value(&res.operator_version)?,
///     serde_json::to_value(&res.instance)?,
/// ] {
///     let kind = object["kind"].as_str().unwrap_or_default();
///     let ar = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("kudo.dev", "v1beta1", kind));
///     let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
///     api.create(&PostParams::default(), &serde_json::from_value(object)?).await?;
/// }
///
/// let manager = Stepper::new(client.clone(), ControllerConfig::default());
/// manager.reconcile("default", &res.instance.metadata.name).await?; // admits it, starts deploy
/// // … make its Deployment ready, edit the spec, reconcile again: each call is one pass.
///
/// let ar = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("kudo.dev", "v1beta1", "Instance"));
/// let instances: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
/// let instance = instances.get(&res.instance.metadata.name).await?;
/// assert_eq!(instance.data["spec"]["planExecution"]["planName"], "deploy");
/// # Ok(()) }
/// ```
pub struct Stepper {
    ctx: Arc<Context>,
}

impl Stepper {
    /// A manager with `config` talking through `client`, that reconciles only when asked.
    pub fn new(client: kube::Client, config: ControllerConfig) -> Stepper {
        let metrics = Arc::new(Metrics::new());
        // Requests are counted by verb as the manager counts them.
        let client = metrics::counting_client(client, metrics.clone());
        let instances = Writer::new(instance_resource()).as_reader();
        let ovs = Writer::new(operator_version_resource()).as_reader();
        // Autopilot watches wake Instances through this channel; nobody listens when stepping.
        let (wake, _) = tokio::sync::mpsc::unbounded_channel();
        let watched = Watched {
            caches: Caches::new(instances, ovs, HashMap::new(), Default::default()),
            autopilot: autopilot::Watches::new(client.clone(), wake),
            echoes: Default::default(),
            child_echoes: Default::default(),
        };
        let ctx = Context::new(client, config, watched, ShardGate::all(), metrics);
        Stepper { ctx: Arc::new(ctx) }
    }

    /// One reconcile of Instance `namespace/name`, as the controller runs it.
    pub async fn reconcile(&self, namespace: &str, name: &str) -> Result<(), ReconcileError> {
        let obj = DynamicObject::new(name, &instance_resource()).within(namespace);
        reconcile::gated(Arc::new(obj), self.ctx.clone())
            .await
            .map(|_| ())
    }

    /// The manager's metrics (requests by verb, plan passes, task outcomes).
    pub fn metrics(&self) -> &Metrics {
        &self.ctx.metrics
    }
}
