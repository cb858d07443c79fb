//! The manager's operations endpoint: one small HTTP server with
//!
//! * `GET /metrics`: the [`Metrics`] in OpenMetrics text format;
//! * `GET /healthz`: 200 while the process runs (liveness: the server answering is the proof);
//! * `GET /readyz`: 200 once the Instance watch has completed its first list, 503 before. A
//!   **standby** (leader election on, lease held by someone else) answers 200 `standby`: it is
//!   healthy and ready to take over, the manager serves no traffic that readiness would gate, and
//!   a standby reporting not-ready would keep a multi-replica manager Deployment from ever
//!   finishing a rollout. Right after acquiring the lease a leader answers 503 until its watch
//!   has synced.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::error::Error;
use crate::metrics::Metrics;

/// The listening socket of the operations endpoint, bound before the manager starts so a caller
/// that asked for port 0 (tests) learns the real address with [`OpsServer::local_addr`].
#[derive(Debug)]
pub struct OpsServer {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
}

impl OpsServer {
    /// Binds the address (e.g. `127.0.0.1:8080`, or port 0 for any free port).
    pub async fn bind(addr: SocketAddr) -> Result<OpsServer, Error> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::Metrics(format!("cannot listen on {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Metrics(format!("cannot read the bound address: {e}")))?;
        Ok(OpsServer { listener, addr })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

/// What the health endpoints report, updated by the controller and the leader election loop.
#[derive(Debug)]
pub(crate) struct Health {
    pub metrics: Arc<Metrics>,
    leader_election: bool,
    acting: AtomicBool,
    synced: AtomicBool,
}

impl Health {
    pub fn new(metrics: Arc<Metrics>, leader_election: bool) -> Health {
        Health {
            metrics,
            leader_election,
            acting: AtomicBool::new(false),
            synced: AtomicBool::new(false),
        }
    }

    /// The controller runs (this process leads, or leader election is off) or stopped.
    pub fn set_acting(&self, acting: bool) {
        self.acting.store(acting, Ordering::SeqCst);
        if !acting {
            self.synced.store(false, Ordering::SeqCst);
        }
        self.metrics.set_leader(acting);
    }

    /// A sharded replica acts while it holds a shard. Its controller runs throughout (crate::shard),
    /// so whether its Instance watch is synced does not change with the shards it holds.
    pub fn set_holding(&self, acting: bool) {
        self.acting.store(acting, Ordering::SeqCst);
        self.metrics.set_leader(acting);
    }

    /// The running controller's Instance watch completed its first list.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::SeqCst);
    }

    fn readiness(&self) -> (StatusCode, &'static str) {
        if self.leader_election && !self.acting.load(Ordering::SeqCst) {
            (StatusCode::OK, "standby\n")
        } else if self.synced.load(Ordering::SeqCst) {
            (StatusCode::OK, "ok\n")
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "instance watch not synced yet\n")
        }
    }
}

async fn metrics(State(h): State<Arc<Health>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(h): State<Arc<Health>>) -> impl IntoResponse {
    h.readiness()
}

/// A spawned task that is aborted when this guard is dropped.
pub(crate) struct AbortOnDrop(pub Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.abort();
        }
    }
}

/// Serves the endpoints until `stop` completes.
pub(crate) async fn serve(
    server: OpsServer,
    health: Arc<Health>,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health);
    tracing::info!(address = %server.addr, "serving /metrics, /healthz and /readyz");
    if let Err(e) = axum::serve(server.listener, app)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::warn!(error = %e, "operations endpoint stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standby_is_ready_and_a_leader_only_once_synced() {
        let h = Health::new(Arc::new(Metrics::new()), true);
        assert_eq!(h.readiness().0, StatusCode::OK);
        h.set_acting(true);
        assert_eq!(h.readiness().0, StatusCode::SERVICE_UNAVAILABLE);
        h.set_synced();
        assert_eq!(h.readiness().0, StatusCode::OK);
        h.set_acting(false);
        assert_eq!(h.readiness(), (StatusCode::OK, "standby\n"));

        let h = Health::new(Arc::new(Metrics::new()), false);
        h.set_acting(true);
        assert_eq!(h.readiness().0, StatusCode::SERVICE_UNAVAILABLE);
        h.set_synced();
        assert_eq!(h.readiness().0, StatusCode::OK);
    }
}
