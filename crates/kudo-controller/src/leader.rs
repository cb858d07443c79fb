//! Leader election: several manager replicas may run, only the holder of a
//! `coordination.k8s.io/v1` Lease reconciles (kube-lease-manager does the locking).
//!
//! * A **standby** runs no controller at all: no watches of Instances, no writes.
//! * On **acquiring** the lease the controller starts (with fresh watches and caches).
//! * On **losing** it (the lease library reports another holder, our own renewal fails, or the
//!   Lease watch shows someone else holding it) the controller is stopped at once: no new
//!   reconcile starts, running ones get [`LOSS_GRACE`] to reach their next await point and are
//!   then dropped (safe: a run's progress lives in the Instance). A failed renewal counts as a
//!   loss, because a leader that cannot confirm its lease must assume a successor exists.
//! * On **clean shutdown** the lease is released, and standbys watch the Lease, so a successor
//!   takes over right away instead of waiting for the lease to expire.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::config::{ControllerConfig, LeaderElection};
use crate::error::Error;
use crate::ops::Health;

/// How long in-flight reconciles may still run after the lease was lost.
pub const LOSS_GRACE: Duration = Duration::from_secs(1);
/// How long in-flight reconciles may still run on a clean shutdown (the lease is still ours).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Upper bound for one lease request on shutdown (release) or after a failure.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A running controller incarnation. Dropped without [`Running::stop`] (the election loop itself
/// was dropped, e.g. its task aborted) it aborts the controller: no reconcile outlives the loop
/// that decided we lead.
struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl Running {
    fn start(client: kube::Client, config: ControllerConfig, health: Arc<Health>) -> Running {
        let (stop, rx) = oneshot::channel::<()>();
        let sharding = crate::gate::Sharding::none(config.ignored_namespaces.clone());
        let task = tokio::spawn(async move {
            crate::controllers::run(client, config, sharding, health, async move {
                let _ = rx.await;
            })
            .await;
        });
        Running {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Graceful stop (no new reconciles), then abort whatever still runs after `grace`.
    async fn stop(mut self, grace: Duration) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let Some(mut task) = self.task.take() else {
            return;
        };
        if tokio::time::timeout(grace, &mut task).await.is_err() {
            debug!("controller did not stop within {grace:?}, aborting its reconciles");
            task.abort();
            let _ = task.await;
        }
    }
}

async fn build(
    client: &kube::Client,
    le: &LeaderElection,
) -> Result<LeaseManager, kube_lease_manager::LeaseManagerError> {
    LeaseManagerBuilder::new(client.clone(), &le.lease_name)
        .with_namespace(&le.namespace)
        .with_identity(&le.identity)
        .with_duration(le.duration_secs())
        .with_grace(le.grace_secs())
        .with_field_manager(format!("kudo-leader-{}", le.identity))
        .build()
        .await
}

/// Competes for the lease until `shutdown` completes, running the controller while holding it.
pub(crate) async fn run(
    client: kube::Client,
    config: ControllerConfig,
    le: LeaderElection,
    health: Arc<Health>,
    shutdown: impl Future,
) -> Result<(), Error> {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut me = Replica {
        client,
        config,
        le: &le,
        health,
        running: None,
        backoff: Duration::from_secs(1),
    };
    info!(identity = %le.identity, lease = %format!("{}/{}", le.namespace, le.lease_name), "standing by for the lease");
    loop {
        let built = tokio::select! {
            m = build(&me.client, &le) => m,
            _ = &mut shutdown => return Ok(()),
        };
        let manager = match built {
            Ok(m) => m,
            Err(e) => {
                warn!(error = %e, "cannot read or create the lease, retrying in {:?}", me.backoff);
                tokio::select! {
                    _ = tokio::time::sleep(me.backoff) => {}
                    _ = &mut shutdown => return Ok(()),
                }
                me.backoff = (me.backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        let Some(wait_before_rebuild) = me.hold(&manager, shutdown.as_mut()).await else {
            return Ok(());
        };
        // A fresh LeaseManager starts from the cluster's state (the old one may believe it
        // still holds a lease it could not renew).
        drop(manager);
        if !wait_before_rebuild.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(wait_before_rebuild) => {}
                _ = &mut shutdown => return Ok(()),
            }
        }
    }
}

/// One replica's side of the election: the controller it runs while it holds the lease.
struct Replica<'a> {
    client: kube::Client,
    config: ControllerConfig,
    le: &'a LeaderElection,
    health: Arc<Health>,
    running: Option<Running>,
    /// The wait before the next attempt after a failed lease request.
    backoff: Duration,
}

/// What a Lease event tells a replica ([`LeaseWatch::observe`]).
#[derive(Debug, PartialEq, Eq)]
enum LeaseChange {
    /// Another replica holds the lease this replica believes it holds.
    HeldByOther(Option<String>),
    /// The lease lost its holder (`previous`), released or expired: worth trying to take over.
    Freed { previous: String, how: Freed },
}

/// The Lease as last seen through the watch.
#[derive(Default)]
struct LeaseWatch {
    /// Holder seen in the previous Lease event (outer None: no event yet).
    last_holder: Option<Option<String>>,
    /// The previous Lease, to tell a released lease from an expired one.
    last_lease: Option<Lease>,
}

impl LeaseWatch {
    /// Judges a Lease event for replica `me` (`running`: whether it runs the controller).
    fn observe(&mut self, lease: Lease, me: &str, running: bool, now_unix: i64) -> Option<LeaseChange> {
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty());
        if running && holder.as_ref().is_some_and(|h| h != me) {
            return Some(LeaseChange::HeldByOther(holder));
        }
        if !running && holder.is_none() && matches!(self.last_holder, Some(Some(_))) {
            let before = self.last_lease.as_ref().and_then(|l| l.spec.as_ref());
            return Some(LeaseChange::Freed {
                previous: self.last_holder.clone().flatten().unwrap_or_default(),
                how: how_freed(before, now_unix),
            });
        }
        self.last_holder = Some(holder);
        self.last_lease = Some(lease);
        None
    }
}

impl Replica<'_> {
    /// Follows one LeaseManager until it must be rebuilt (`Some(wait)`) or `shutdown` completed
    /// (`None`, the lease released).
    async fn hold<F: Future>(
        &mut self,
        manager: &LeaseManager,
        mut shutdown: std::pin::Pin<&mut F>,
    ) -> Option<Duration> {
        let le = self.le;
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &le.namespace);
        let mut lease_events = watcher(
            leases,
            watcher::Config::default().fields(&format!("metadata.name={}", le.lease_name)),
        )
        .default_backoff()
        .applied_objects()
        .boxed();
        let mut watch = LeaseWatch::default();
        // One `changed()` call stays pending across Lease events: cancelling it mid-renewal
        // could leave the library with a stale expiry and make it renew in a tight loop.
        let mut changed = Box::pin(manager.changed());
        loop {
            tokio::select! {
                _ = &mut shutdown => {
                    drop(changed);
                    self.shut_down(manager).await;
                    return None;
                }
                res = &mut changed => match res {
                    Ok(held) => {
                        changed = Box::pin(manager.changed());
                        self.lease_state(held).await;
                    }
                    Err(e) => {
                        warn!(error = %e, "lease request failed: standing down until the lease is confirmed again");
                        drop(changed);
                        if self.stop_controller(LOSS_GRACE).await {
                            // Best effort: hand the lease over rather than block it.
                            let _ = tokio::time::timeout(RELEASE_TIMEOUT, manager.release()).await;
                        }
                        let wait = self.backoff;
                        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                        return Some(wait);
                    }
                },
                Some(ev) = lease_events.next() => match ev {
                    Ok(lease) => match watch.observe(lease, &le.identity, self.running.is_some(), unix_now()) {
                        Some(LeaseChange::HeldByOther(holder)) => {
                            warn!(holder = ?holder, "the lease is held by another replica: stopping the controller");
                            self.stop_controller(LOSS_GRACE).await;
                            return Some(Duration::ZERO);
                        }
                        Some(LeaseChange::Freed { previous, how }) => {
                            match how {
                                Freed::Released => info!(previous, "the lease was released: trying to take over"),
                                Freed::Expired => info!(previous, "the lease expired: trying to take over"),
                            }
                            return Some(Duration::ZERO);
                        }
                        None => {}
                    },
                    Err(e) => debug!(error = %e, "lease watch error (retried)"),
                },
            }
        }
    }

    /// The lease manager's answer: `held` starts the controller if it is not running, losing
    /// the lease stops it.
    async fn lease_state(&mut self, held: bool) {
        if held {
            self.backoff = Duration::from_secs(1);
            if self.running.is_none() {
                info!(identity = %self.le.identity, "acquired the lease: starting the controller");
                self.health.set_acting(true);
                self.running = Some(Running::start(
                    self.client.clone(),
                    self.config.clone(),
                    self.health.clone(),
                ));
            }
        } else if self.running.is_some() {
            warn!(identity = %self.le.identity, "lost the lease: stopping the controller");
            self.stop_controller(LOSS_GRACE).await;
        }
    }

    /// Stops the controller if it runs (reconciles get `grace` to finish); whether it ran.
    async fn stop_controller(&mut self, grace: Duration) -> bool {
        let Some(r) = self.running.take() else {
            return false;
        };
        r.stop(grace).await;
        self.health.set_acting(false);
        true
    }

    /// A clean shutdown: the controller stops and the lease is released for a standby.
    async fn shut_down(&mut self, manager: &LeaseManager) {
        if self.running.is_some() {
            info!("shutting down: stopping the controller and releasing the lease");
            self.stop_controller(SHUTDOWN_GRACE).await;
        }
        match tokio::time::timeout(RELEASE_TIMEOUT, manager.release()).await {
            Ok(Ok(())) => debug!("lease released"),
            Ok(Err(e)) => warn!(error = %e, "releasing the lease failed; it expires by itself"),
            Err(_) => warn!("releasing the lease timed out; it expires by itself"),
        }
    }
}

/// Seconds since the Unix epoch.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// How a lease that had a holder became free.
#[derive(Debug, PartialEq, Eq)]
enum Freed {
    /// Its holder gave it up before it ran out (a clean shutdown).
    Released,
    /// It ran out without a renewal (its holder crashed or lost the API server) and a standby
    /// cleared it.
    Expired,
}

/// Tells a released lease from an expired one by the holder's last renewal (`before`, the Lease
/// spec while it was still held) and the time now (Unix seconds), so the log says which it was
/// instead of calling every freed lease "released".
fn how_freed(before: Option<&k8s_openapi::api::coordination::v1::LeaseSpec>, now_unix: i64) -> Freed {
    let renewed = before
        .and_then(|s| s.renew_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().and_then(|t| kudo_engine::Timestamp::parse(t).ok()));
    let duration = before.and_then(|s| s.lease_duration_seconds).unwrap_or(0);
    match renewed {
        Some(r) if kudo_engine::Timestamp::from_unix(now_unix).seconds_since(r) < i64::from(duration) => {
            Freed::Released
        }
        _ => Freed::Expired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_events_tell_a_chance_to_take_over_from_another_holder() {
        let lease = |holder: Option<&str>| Lease {
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                holder_identity: holder.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut w = LeaseWatch::default();
        assert_eq!(w.observe(lease(Some("a")), "me", false, 0), None);
        assert_eq!(
            w.observe(lease(None), "me", false, 0),
            Some(LeaseChange::Freed {
                previous: "a".into(),
                how: Freed::Expired
            })
        );
        let mut w = LeaseWatch::default();
        assert_eq!(w.observe(lease(None), "me", false, 0), None);
        assert_eq!(w.observe(lease(Some("me")), "me", true, 0), None);
        assert_eq!(
            w.observe(lease(Some("b")), "me", true, 0),
            Some(LeaseChange::HeldByOther(Some("b".into())))
        );
    }

    #[test]
    fn a_freed_lease_is_released_before_its_expiry_and_expired_after() {
        let spec: k8s_openapi::api::coordination::v1::LeaseSpec = serde_json::from_value(
            serde_json::json!({"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-01-01T00:00:00.000000Z"}),
        )
        .unwrap();
        let renewed = kudo_engine::Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        let at = |secs: u64| {
            let t = renewed.plus_seconds(secs);
            t.seconds_since(kudo_engine::Timestamp::from_unix(0))
        };
        assert_eq!(how_freed(Some(&spec), at(3)), Freed::Released);
        assert_eq!(how_freed(Some(&spec), at(15)), Freed::Expired);
        assert_eq!(how_freed(Some(&spec), at(40)), Freed::Expired);
        assert_eq!(how_freed(None, at(1)), Freed::Expired);
    }

    fn le(secs: u64) -> LeaderElection {
        LeaderElection {
            lease_name: "kudo-manager".into(),
            namespace: "kudo-system".into(),
            identity: "pod-a".into(),
            lease_duration: Duration::from_secs(secs),
        }
    }

    #[test]
    fn validation_rejects_short_or_fractional_leases_and_empty_names() {
        assert!(le(2).validate().is_ok());
        assert!(le(1).validate().unwrap_err().to_string().contains("at least 2"));
        let mut l = le(15);
        l.lease_duration = Duration::from_millis(2500);
        assert!(l.validate().is_err());
        let mut l = le(15);
        l.identity = " ".into();
        assert!(l.validate().unwrap_err().to_string().contains("identity"));
    }

    #[test]
    fn renewal_margin_is_a_third_of_the_lease_and_below_it() {
        assert_eq!(le(2).grace_secs(), 1);
        assert_eq!(le(3).grace_secs(), 1);
        assert_eq!(le(15).grace_secs(), 5);
        for s in 2..100 {
            assert!(le(s).grace_secs() < s);
        }
    }
}
