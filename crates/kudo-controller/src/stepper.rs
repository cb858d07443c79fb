//! The manager's reconcile, one at a time, without watches or a work queue: a test steps an
//! Instance through its plans (`reconcile`, change the world, `reconcile` again) and looks at
//! what each reconcile wrote. With an in-process API server
//! (`kudo_apiserver::ApiServer::in_process`) a reconcile is a few function calls, so whole
//! reconciles are table-tested in milliseconds (`tests/reconcile_steps.rs`).
//!
//! Nothing here decides anything: [`Stepper::reconcile`] is the function the controller's queue
//! calls. Caches start empty and are never fed, so every read goes to the server (the manager
//! falls back to that whenever a cache is not synced).

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::reflector::store::Writer;

use crate::{Context, ControllerConfig, ReconcileError, autopilot, cache, context, instance_resource, ops};

/// Runs single reconciles of Instances (see the module docs).
pub struct Stepper {
    ctx: Arc<Context>,
}

impl Stepper {
    /// A manager with `config` talking through `client`, that reconciles only when asked.
    pub fn new(client: kube::Client, config: ControllerConfig) -> Stepper {
        let metrics = Arc::new(crate::Metrics::new());
        // Requests are counted by verb as the manager counts them.
        let client = crate::metrics::counting_client(client, metrics.clone());
        let health = ops::Health::new(metrics, false);
        let ovs = Writer::new(crate::operator_version_resource()).as_reader();
        let caches = cache::Caches::new(Writer::new(instance_resource()).as_reader(), ovs, HashMap::new());
        // Autopilot watches wake Instances through this channel; nobody listens when stepping.
        let (wake, _) = tokio::sync::mpsc::unbounded_channel();
        let autopilot = autopilot::Watches::new(client.clone(), wake);
        Stepper {
            ctx: context(
                client,
                config,
                (caches, Default::default(), Default::default()),
                autopilot,
                crate::gate::ShardGate::all(),
                &health,
            ),
        }
    }

    /// One reconcile of Instance `namespace/name`, as the controller runs it.
    pub async fn reconcile(&self, namespace: &str, name: &str) -> Result<(), ReconcileError> {
        let obj = DynamicObject::new(name, &instance_resource()).within(namespace);
        crate::reconcile::reconcile(Arc::new(obj), self.ctx.clone())
            .await
            .map(|_| ())
    }

    /// The manager's metrics (requests by verb, plan passes, task outcomes).
    pub fn metrics(&self) -> &crate::Metrics {
        &self.ctx.metrics
    }
}
