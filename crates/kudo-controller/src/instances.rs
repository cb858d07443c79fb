//! The Instance controller: the watches of [`crate::watches`] feed the caches and the queue, and
//! kube-runtime's applier runs [`crate::reconcile`] for each Instance they name, `concurrency` at a
//! time, each after `debounce` without a further trigger (both from the configuration).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cache::{Caches, InstanceVersions};
use crate::context::{Context, Watched};
use crate::echoes::Echoes;
use crate::incarnation::Incarnation;
use crate::ops::Health;
use crate::running::Running;
use crate::{reconcile, watches};

/// Declares the watches (which kinds, in which scope, and which Instances an event of each wakes)
/// and the context the reconciles share; the returned future runs the queue.
pub(crate) fn start(inc: &mut Incarnation) -> BoxFuture<'static, ()> {
    let gate = inc.sharding.gate.clone();
    let mut watches = watches::Watches::new(inc.client.clone(), inc.config.namespace.clone(), &gate);
    let echoes = Arc::new(Echoes::default());
    let child_echoes = Arc::new(Echoes::default());
    let running = Arc::new(Running::default());
    let versions = Arc::new(InstanceVersions::default());
    let instances = watches.instances(echoes.clone(), running.clone(), versions.clone());
    if let Some(granted) = inc.sharding.granted.take() {
        watches.shards_granted(&instances, granted, gate.count());
    }
    let operator_versions = watches.operator_versions(&instances);
    watches.secrets(&instances);
    let children = watches.children(running, child_echoes.clone());
    let watched = Watched {
        caches: Caches::new(instances.clone(), operator_versions, children, versions),
        autopilot: watches.autopilot(),
        echoes,
        child_echoes,
    };
    let metrics = inc.health.metrics.clone();
    let ctx = Context::new(inc.client.clone(), inc.config.clone(), watched, gate, metrics);
    let queue = Queue {
        triggers: watches.triggers,
        store: instances,
        health: inc.health.clone(),
        stop: inc.stop.clone(),
    };
    queue.run(Arc::new(ctx)).boxed()
}

/// The reconcile queue of one incarnation.
struct Queue {
    triggers: Vec<watches::Trigger>,
    /// The Instance cache: ready once the first list is in.
    store: Store<DynamicObject>,
    health: Arc<Health>,
    stop: CancellationToken,
}

impl Queue {
    /// Reconciles the Instances the triggers name until `stop` is cancelled (running reconciles
    /// finish, no new ones start); ready once the first list of Instances is in the cache.
    async fn run(self, ctx: Arc<Context>) {
        let limits = kube::runtime::controller::Config::default()
            .concurrency(ctx.config.concurrency)
            .debounce(ctx.config.debounce);
        // kube-runtime's applier (what `Controller::run` is built on) with our own trigger
        // streams: each reconcile runs on its own task, cancelled if this future is dropped.
        let queue =
            futures::stream::select_all(self.triggers).take_until(self.stop.clone().cancelled_owned());
        let mut stream = std::pin::pin!(
            kube::runtime::applier(
                |obj, ctx: Arc<Context>| {
                    kube::runtime::utils::CancelableJoinHandle::spawn(
                        reconcile::gated(obj, ctx).in_current_span(),
                        &tokio::runtime::Handle::current(),
                    )
                },
                reconcile::error_policy,
                ctx,
                self.store.clone(),
                queue,
                limits,
            )
            .for_each(|res| async move {
                match res {
                    Ok((obj, _)) => tracing::trace!(instance = %obj, "reconciled"),
                    Err(e) => tracing::debug!(error = %e, "reconcile failed"),
                }
            })
        );
        // Ready once the first list of Instances is in the cache (the store is fed by the stream).
        let (store, health) = (self.store, self.health);
        let synced = async {
            if store.wait_until_ready().await.is_ok() {
                health.set_synced();
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = &mut stream => {}
            _ = synced => {}
            _ = self.stop.cancelled() => stream.await,
        }
    }
}
