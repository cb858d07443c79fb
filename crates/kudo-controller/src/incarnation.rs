//! What each controller of an incarnation ([`crate::controllers`]) starts from, and how it is
//! started.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::config::ControllerConfig;
use crate::gate::Sharding;
use crate::ops::Health;

/// What every controller of one incarnation starts from.
pub(crate) struct Incarnation {
    /// The manager's own client (requests are counted by verb).
    pub client: kube::Client,
    pub config: ControllerConfig,
    /// Which Instances this replica acts on, and (sharded) the shards it acquires.
    pub sharding: Sharding,
    pub health: Arc<Health>,
    /// Cancelled when the incarnation stops: a controller stops taking new work, finishes what
    /// runs (or drops it) and returns.
    pub stop: CancellationToken,
}

/// Sets a controller up (its watches, what it shares) and returns the future that runs it until
/// [`Incarnation::stop`] is cancelled.
pub(crate) type Start = fn(&mut Incarnation) -> BoxFuture<'static, ()>;

impl Incarnation {
    /// `run` until the incarnation stops (then dropped where it waits).
    pub fn until_stopped(&self, run: impl Future<Output = ()> + Send + 'static) -> BoxFuture<'static, ()> {
        let stop = self.stop.clone();
        async move {
            tokio::select! {
                _ = run => {}
                _ = stop.cancelled() => {}
            }
        }
        .boxed()
    }
}
