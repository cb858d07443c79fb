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
/// ```no_run
/// # async fn demo(client: kube::Client) -> Result<(), kudo_controller::ReconcileError> {
/// use kudo_controller::{ControllerConfig, Stepper};
///
/// let manager = Stepper::new(client, ControllerConfig::default());
/// manager.reconcile("default", "my-instance").await?; // admits the Instance, starts deploy
/// // … make a Deployment ready, edit the spec …
/// manager.reconcile("default", "my-instance").await?; // the next pass
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
            caches: Caches::new(instances, ovs, HashMap::new()),
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
