//! Sharded managers (`--shards N`): several replicas share the Instances, each acting
//! only on the shards whose Lease it holds. The decisions (which shard an Instance is in, what a
//! replica acquires, renews, releases or has lost) are [`kudo_engine::shard`]'s; this module
//! keeps the Leases and the gate every reconcile passes.
//!
//! * **The gate** ([`crate::gate::ShardGate`]): what this replica may reconcile now; the Leases
//!   decide what it holds.
//! * **The Leases** ([`run`]): `<lease>-shard-<n>` per shard and `<lease>-member-<identity>` per
//!   replica, in the lease namespace, labelled `kudo.dev/lease-group=<lease>`. Every third of the
//!   lease duration a replica lists them (one LIST), renews its member Lease and carries out
//!   [`kudo_engine::shard::decide`]. Acquiring writes with the resourceVersion the replica saw (or
//!   creates), so only one of two racing replicas wins. Member Leases of replicas gone for ten
//!   lease durations are deleted by whoever sees them.
//! * **What a replica watches** ([`crate::views`]): the Instances and children labelled with the
//!   buckets of its shards (`kudo.dev/bucket`, [`kudo_engine::shard::bucket_of`]), the Instances
//!   not labelled yet, and every child Instance. The gate publishes the held set; each change
//!   restarts the labelled watches.
//!
//! kube-lease-manager (what [`crate::leader`] uses) keeps one Lease per manager with its own
//! timers; N shard Leases and a member count need one coordinated view per tick, hence the
//! hand-written loop here.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kudo_engine::shard::{LeaseView, ShardMove, Survey, decide};
use tracing::{debug, info, warn};

use crate::config::{ControllerConfig, LeaderElection};
use crate::error::Error;
use crate::gate::{ShardGate, Sharding};
use crate::ops::Health;

/// Label naming the lease group (the `--lease-name`) of shard and member Leases.
pub const LEASE_GROUP_LABEL: &str = "kudo.dev/lease-group";
/// Label on shard Leases: the shard number.
pub const SHARD_LABEL: &str = "kudo.dev/shard";
/// How long a clean shutdown waits for the reconciles to stop, and then for the controller.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The Lease names of one lease group.
struct Names<'a>(&'a str);

impl Names<'_> {
    fn shard(&self, n: u32) -> String {
        format!("{}-shard-{n}", self.0)
    }

    /// A member Lease's name: the identity made a valid object name (lower case, `[a-z0-9.-]`).
    fn member(&self, identity: &str) -> String {
        let id: String = identity
            .to_ascii_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        format!("{}{}", self.member_prefix(), id.trim_matches('-'))
    }

    fn member_prefix(&self) -> String {
        format!("{}-member-", self.0)
    }
}

/// The Leases of the group as one tick saw them.
#[derive(Default)]
struct Seen {
    shards: BTreeMap<u32, Lease>,
    members: Vec<Lease>,
}

fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.as_ref();
    let renewed = spec
        .and_then(|s| s.renew_time.as_ref().or(s.acquire_time.as_ref()))
        .map_or(0, |t| t.0.as_millisecond());
    let secs = spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0);
    LeaseView {
        holder: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        valid_until_ms: renewed + i64::from(secs) * 1000,
    }
}

/// One replica's side of the shard Leases.
struct Replica {
    api: Api<Lease>,
    le: LeaderElection,
    gate: Arc<ShardGate>,
    health: Arc<Health>,
}

impl Replica {
    fn group(&self) -> Names<'_> {
        Names(&self.le.lease_name)
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.le.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// The tick period: a third of the lease duration, at least one second.
    fn period(&self) -> Duration {
        (self.le.lease_duration / 3).max(Duration::from_secs(1))
    }

    async fn list(&self) -> Result<Seen, kube::Error> {
        let lp = ListParams::default().labels(&format!("{LEASE_GROUP_LABEL}={}", self.le.lease_name));
        let mut seen = Seen::default();
        let members_prefix = self.group().member_prefix();
        for l in self.api.list(&lp).await?.items {
            let name = l.metadata.name.clone().unwrap_or_default();
            let shard = l.metadata.labels.as_ref().and_then(|m| m.get(SHARD_LABEL));
            match shard.and_then(|s| s.parse::<u32>().ok()) {
                Some(n) if name == self.group().shard(n) => {
                    seen.shards.insert(n, l);
                }
                _ if name.starts_with(&members_prefix) => seen.members.push(l),
                _ => {}
            }
        }
        Ok(seen)
    }

    /// A Lease of the group held by this replica from now on.
    fn fresh(&self, name: String, shard: Option<u32>, transitions: i32) -> Lease {
        let mut labels = BTreeMap::from([(LEASE_GROUP_LABEL.to_string(), self.le.lease_name.clone())]);
        if let Some(n) = shard {
            labels.insert(SHARD_LABEL.to_string(), n.to_string());
        }
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(self.le.namespace.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.le.identity.clone()),
                lease_duration_seconds: Some(self.duration_secs()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Takes `existing` (as seen, so the write fails if anyone changed it since) or creates it.
    async fn take(
        &self,
        name: String,
        shard: Option<u32>,
        existing: Option<&Lease>,
    ) -> Result<(), kube::Error> {
        let spec = existing.and_then(|l| l.spec.as_ref());
        let same_holder = spec.and_then(|s| s.holder_identity.as_deref()) == Some(self.le.identity.as_str());
        let transitions = spec.and_then(|s| s.lease_transitions).unwrap_or(0) + i32::from(!same_holder);
        let mut lease = self.fresh(name.clone(), shard, transitions);
        match existing {
            None => self.api.create(&PostParams::default(), &lease).await.map(|_| ()),
            Some(old) => {
                lease.metadata.resource_version = old.metadata.resource_version.clone();
                if same_holder && let (Some(s), Some(o)) = (lease.spec.as_mut(), spec) {
                    s.acquire_time = o.acquire_time.clone();
                }
                self.api
                    .replace(&name, &PostParams::default(), &lease)
                    .await
                    .map(|_| ())
            }
        }
    }

    /// Frees `lease` (still as seen): no holder, so others may take it at once.
    async fn free(&self, lease: &Lease) -> Result<(), kube::Error> {
        let mut l = lease.clone();
        if let Some(s) = l.spec.as_mut() {
            s.holder_identity = None;
        }
        let name = l.metadata.name.clone().unwrap_or_default();
        self.api
            .replace(&name, &PostParams::default(), &l)
            .await
            .map(|_| ())
    }
}

impl Replica {
    /// One tick: list; stop on lost shards (at once: someone else holds them), renew what is kept
    /// (before any wait: nothing in a tick may delay a renewal past the lease), keep the member
    /// Lease, then release and acquire.
    async fn tick(&self) {
        let seen = match self.list().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot list the shard leases; acting on nothing until they are seen again");
                let held: Vec<u32> = self.gate.held().into_iter().collect();
                self.gate.revoke(&held, Duration::ZERO).await;
                return self.publish();
            }
        };
        let leases: BTreeMap<u32, LeaseView> = seen.shards.iter().map(|(n, l)| (*n, view(l))).collect();
        let members: Vec<LeaseView> = seen.members.iter().map(view).collect();
        let held = self.gate.held();
        let survey = Survey {
            me: &self.le.identity,
            now_ms: Timestamp::now().as_millisecond(),
            shards: self.gate.count(),
            leases: &leases,
            members: &members,
            held: &held,
        };
        let moves = decide(&survey);
        let of = |kind: fn(&ShardMove) -> bool| -> Vec<u32> {
            moves.iter().filter(|m| kind(m)).map(ShardMove::shard).collect()
        };
        let lost = of(|m| matches!(m, ShardMove::Lost(_)));
        if !lost.is_empty() {
            warn!(shards = ?lost, "shard leases lost: stopping their reconciles");
            self.gate.revoke(&lost, Duration::ZERO).await;
        }
        for n in of(|m| matches!(m, ShardMove::Renew(_))) {
            self.renew(n, &seen).await;
        }
        self.keep_member(&seen).await;
        self.release(&of(|m| matches!(m, ShardMove::Release(_))), &seen)
            .await;
        for n in of(|m| matches!(m, ShardMove::Acquire(_))) {
            self.acquire(n, &seen).await;
        }
        self.publish();
    }

    async fn renew(&self, n: u32, seen: &Seen) {
        match self
            .take(self.group().shard(n), Some(n), seen.shards.get(&n))
            .await
        {
            Ok(()) => self.gate.renewed(n),
            Err(e) => {
                warn!(shard = n, error = %e, "renewing the shard lease failed: stopping its reconciles");
                self.gate.revoke(&[n], Duration::ZERO).await;
            }
        }
    }

    async fn acquire(&self, n: u32, seen: &Seen) {
        match self
            .take(self.group().shard(n), Some(n), seen.shards.get(&n))
            .await
        {
            Ok(()) => {
                info!(shard = n, "acquired the shard: reconciling its Instances");
                self.gate.grant(n);
            }
            Err(e) => debug!(shard = n, error = %e, "another replica took the shard first"),
        }
    }

    /// Stops acting on `shards` and frees their Leases once their reconciles are gone (waiting at
    /// most a tick period, so the next renewals stay on time); still running, the Leases are
    /// left to expire instead, which keeps any successor out until then.
    async fn release(&self, shards: &[u32], seen: &Seen) {
        if shards.is_empty() {
            return;
        }
        if !self.gate.revoke(shards, self.period()).await {
            warn!(shards = ?shards, "reconciles of released shards did not stop in time: their leases expire instead");
            return;
        }
        for n in shards {
            let Some(l) = seen.shards.get(n) else { continue };
            crate::failpoint::hit(crate::failpoint::SHARD_HANDOVER);
            match self.free(l).await {
                Ok(()) => info!(shard = n, "released the shard (above this replica's fair share)"),
                Err(e) => debug!(shard = n, error = %e, "releasing a shard failed; it expires by itself"),
            }
        }
    }

    /// Renews (or creates) this replica's member Lease; deletes member Leases long expired.
    async fn keep_member(&self, seen: &Seen) {
        let mine = self.group().member(&self.le.identity);
        let existing = seen
            .members
            .iter()
            .find(|l| l.metadata.name.as_deref() == Some(mine.as_str()));
        if let Err(e) = self.take(mine.clone(), None, existing).await {
            debug!(error = %e, "renewing the member lease failed (retried at the next tick)");
        }
        let now = Timestamp::now().as_millisecond();
        let forgotten = i64::from(self.duration_secs()) * 10_000;
        for l in &seen.members {
            let name = l.metadata.name.clone().unwrap_or_default();
            if name != mine && view(l).valid_until_ms + forgotten < now {
                let _ = self.api.delete(&name, &DeleteParams::default()).await;
            }
        }
    }

    fn publish(&self) {
        let n = self.gate.held().len();
        self.health.metrics.set_shards_held(n);
        self.health.set_holding(n > 0);
    }

    /// A clean shutdown: stop acting, free every shard and the member Lease.
    async fn leave(&self) {
        let held: Vec<u32> = self.gate.held().into_iter().collect();
        if !self.gate.revoke(&held, SHUTDOWN_GRACE).await {
            warn!("reconciles did not stop in time: the shard leases expire instead of being freed");
            return self.publish();
        }
        if let Ok(seen) = self.list().await {
            for n in held {
                if let Some(l) = seen.shards.get(&n) {
                    let _ = self.free(l).await;
                }
            }
        }
        let mine = self.group().member(&self.le.identity);
        let _ = self.api.delete(&mine, &DeleteParams::default()).await;
        self.publish();
    }
}

/// Runs a sharded replica until `shutdown` completes: the controller (its reconciles gated by the
/// shards held) and the Lease ticks.
pub(crate) async fn run(
    client: kube::Client,
    config: ControllerConfig,
    le: LeaderElection,
    health: Arc<Health>,
    shutdown: impl Future,
) -> Result<(), Error> {
    let (gate, granted) = ShardGate::sharded(
        config.shards,
        le.lease_duration,
        crate::views::LABELLED_VIEWS,
        config.ignored_namespaces.clone(),
    );
    let me = Replica {
        api: Api::namespaced(client.clone(), &le.namespace),
        le: le.clone(),
        gate: gate.clone(),
        health: health.clone(),
    };
    info!(identity = %le.identity, shards = config.shards, group = %le.lease_name, "joining the shard leases");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Its own task, so a tick waiting for a shard to drain never stalls the watches; aborted
    // with this future (a killed replica acts no more).
    let mut controller = crate::ops::AbortOnDrop(Some(tokio::spawn(crate::controllers::run(
        client,
        config,
        Sharding {
            gate,
            granted: Some(granted),
        },
        health.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ))));
    let mut shutdown = std::pin::pin!(shutdown);
    let mut ticks = tokio::time::interval(me.period());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = ticks.tick() => me.tick().await,
        }
    }
    me.leave().await;
    let _ = stop_tx.send(());
    if let Some(task) = controller.0.take() {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, task).await;
    }
    Ok(())
}
