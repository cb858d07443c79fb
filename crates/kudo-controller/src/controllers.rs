//! The controllers one manager incarnation runs, each a module with its own watches, started from
//! [`CONTROLLERS`] by [`run`]: the Instance controller (plans, drift, autopilot,
//! [`crate::instances`]), one controller per typed API ([`crate::typed`]), the fleet rollouts
//! ([`crate::rollouts`]) and the package sources ([`crate::sources`]). A new controller is
//! a module with a [`crate::incarnation::Start`] function and one line in [`CONTROLLERS`].
//!
//! An incarnation lives while this replica acts: for the whole process without leader election,
//! while holding the Lease with it ([`crate::leader`]), for as long as a sharded replica runs
//! ([`crate::shard`]; its gate decides what it acts on). Each controller gets the same
//! [`Incarnation`]: the manager's client, the configuration, the shard gate, the health the
//! operations endpoint reports, and the token that says when to stop.

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::ControllerConfig;
use crate::gate::Sharding;
use crate::incarnation::{Incarnation, Start};
use crate::ops::Health;
use crate::{instances, rollouts, sources, typed};

/// The controllers of an incarnation, by name, in the order they start.
pub(crate) static CONTROLLERS: &[(&str, Start)] = &[
    ("instances", instances::start),
    ("typed APIs", typed::start),
    ("rollouts", rollouts::start),
    ("operator sources", sources::start),
];

/// One controller incarnation: every controller of [`CONTROLLERS`] on its own task until
/// `shutdown` completes (graceful: each stops taking new work and finishes what runs). Dropped,
/// it aborts them all.
pub(crate) async fn run(
    client: kube::Client,
    config: ControllerConfig,
    sharding: Sharding,
    health: Arc<Health>,
    shutdown: impl Future,
) {
    let mut inc = Incarnation {
        client,
        config,
        sharding,
        health,
        stop: CancellationToken::new(),
    };
    let mut running = tokio::task::JoinSet::new();
    for (name, start) in CONTROLLERS {
        tracing::debug!(controller = name, "starting");
        running.spawn(start(&mut inc));
    }
    tracing::info!("kudo controller started");
    shutdown.await;
    inc.stop.cancel();
    while running.join_next().await.is_some() {}
    tracing::info!("kudo controller stopped");
}
